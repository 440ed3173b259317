import { describe, expect, it } from 'vitest';
import { renderAttachments, renderTemplate, runScripted, scriptedConfigSchema } from '../../agents/scripted';

describe('scripted agent', () => {
  const config = scriptedConfigSchema.parse({
    rules: [
      {
        match: '^weather in (\\w+)$',
        flags: 'i',
        tool_call: { name: 'weather', arguments: { city: '{{1}}' } },
        reply: 'It is {{tool_result}}',
      },
      { match: '^hi\\b', reply: 'Hello, {{text}}!' },
    ],
    default_reply: 'You said: {{text}}',
  });

  it('the first matching rule wins, on the trimmed text, with capture groups in templates', () => {
    expect(runScripted(config, '  hi there ')).toEqual({ kind: 'reply', text: 'Hello, hi there!' });
    expect(runScripted(config, 'Weather in Paris')).toMatchObject({
      kind: 'tool_call',
      name: 'weather',
      arguments: { city: 'Paris' },
    });
    expect(runScripted(config, 'anything else')).toEqual({ kind: 'reply', text: 'You said: anything else' });
    expect(renderTemplate('It is {{tool_result}}', { text: '', groups: [], tool_result: '{"t":20}' })).toBe(
      'It is {"t":20}',
    );
  });

  it('accepts patterns only a backtracking engine must fear (they run on RE2), refuses invalid ones', () => {
    // tests/unit/patterns.test.ts covers the engine, its refusals and the ReDoS corpus.
    for (const match of ['(a+)+$', '^(\\w*)*$', '(x|y+){2,}']) {
      expect(scriptedConfigSchema.safeParse({ rules: [{ match, reply: 'x' }] }).success, match).toBe(true);
    }
    expect(scriptedConfigSchema.safeParse({ rules: [{ match: '(', reply: 'x' }] }).success).toBe(false);
  });
});

describe('attachment URLs from templates', () => {
  it("put the user's words in as data: they can never change the host or the path", () => {
    const [a] = renderAttachments([{ url: 'https://cdn.example/{{1}}.png', caption: 'a {{1}}' }], {
      text: 'x',
      groups: ['', '169.254.169.254#/../admin?x=1'],
    })!;
    expect(new URL(a!.url).host).toBe('cdn.example');
    expect(new URL(a!.url).pathname).toBe('/169.254.169.254%23%2F..%2Fadmin%3Fx%3D1.png');
    expect(a!.caption).toBe('a 169.254.169.254#/../admin?x=1');
  });
});
