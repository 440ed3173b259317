import { describe, expect, it } from 'vitest';
import { WECOM_MEDIA_CALLS, wecomMediaBudgetMs } from '../../activities/media-out';
import { ArtifactConfigError, openArtifactStore } from '../../lib/artifact-open';
import type { SecretBox } from '../../lib/secret-box';

// A credentials secret that cannot be opened or parsed must not reach a log through err.message:
// JSON.parse quotes its input (part of an S3 secret).
describe('openArtifactStore: the credentials secret', () => {
  const inputs = {
    backend: {
      profile_id: 'bp_1',
      artifacts: { provider: 's3', bucket: 'b-1', credentials_secret_ref: 'sec_1' },
    },
    secretRef: 'sec_1',
    sealed: { key_id: 'k1', ciphertext: Buffer.from('x') },
  };
  const withOpen = (open: () => string) =>
    ({ open, seal: () => Buffer.alloc(0), keyId: 'k1' }) as unknown as SecretBox;

  it.each([
    ['not JSON (its text would be quoted)', () => '{"secret_access_key": "AKIA-SUPER-SECRET'],
    ['JSON that is no object', () => '"AKIA-SUPER-SECRET"'],
    [
      'a secret box that fails',
      () => {
        throw new Error('cannot open with key AKIA-SUPER-SECRET');
      },
    ],
  ])('%s → a fixed ArtifactConfigError without the cause', (_name, open) => {
    let caught: unknown;
    try {
      openArtifactStore({ secrets: withOpen(open), timeoutMs: 10_000 }, 't_1', inputs);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ArtifactConfigError);
    expect(String((caught as Error).message)).not.toMatch(/SUPER-SECRET/);
    expect((caught as Error).cause).toBeUndefined();
  });
});

// 12 WeCom calls × the send timeout cannot fit the `sends` (1 minute) or `quickSends` (20 s)
// StartToClose: the lease and the calls are cut to what is left of the attempt.
describe('WeCom media send budget', () => {
  it('is the worst case when it fits, else what is left of the attempt less the receipt margin', () => {
    expect(WECOM_MEDIA_CALLS).toBe(12);
    expect(wecomMediaBudgetMs(2000, 60_000)).toBe(24_000);
    expect(wecomMediaBudgetMs(10_000, 60_000)).toBe(55_000);
    expect(wecomMediaBudgetMs(10_000, 20_000)).toBe(15_000);
    expect(wecomMediaBudgetMs(10_000, 1000)).toBe(0);
  });
});
