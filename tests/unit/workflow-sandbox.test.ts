import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SEARCH_ATTRIBUTE_KEYS } from '../../workflows/shared';

const root = join(import.meta.dirname, '../..');
const workflowFiles = readdirSync(join(root, 'workflows')).filter((f) => f.endsWith('.ts'));

// Biome's noRestrictedImports guards most of the sandbox; it cannot tell a type import from a
// value import, so this check covers what workflows may import only as types.
describe('workflow sandbox', () => {
  it('workflows import activities, agents and I/O modules as types only', () => {
    const offenders: string[] = [];
    for (const file of workflowFiles) {
      const source = readFileSync(join(root, 'workflows', file), 'utf8');
      for (const m of source.matchAll(/^import\s+(?!type\b)[^;]*?from\s+'([^']+)'/gms)) {
        const spec = m[1]!;
        const allowed =
          spec.startsWith('@temporalio/workflow') ||
          spec.startsWith('@temporalio/common') ||
          spec.startsWith('./');
        if (!allowed) offenders.push(`${file}: ${spec}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it('temporal-dev.sh registers exactly the search attributes the workflows set', () => {
    const script = readFileSync(join(root, 'temporal-dev.sh'), 'utf8');
    const registered = [...script.matchAll(/(Switchyard\w+)=Keyword/g)].map((m) => m[1]).sort();
    expect(registered).toEqual(SEARCH_ATTRIBUTE_KEYS.map((k) => k.name).sort());
  });
});
