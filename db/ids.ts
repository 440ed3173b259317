import { newUlid } from '../lib/ulid';

const PREFIX = /^[a-z]{1,8}$/;

/**
 * A type-prefixed, time-sortable id such as `t_01J…`. The ULID's first character is 0-7, so the
 * result satisfies the schema's `^<prefix>_[0-7][0-9A-HJKMNP-TV-Z]{25}$` CHECKs.
 */
export function newId<P extends string>(prefix: P): `${P}_${string}` {
  if (!PREFIX.test(prefix)) throw new Error(`invalid id prefix: ${prefix}`);
  return `${prefix}_${newUlid()}`;
}
