// The console's view layer: Preact with htm tagged templates, loaded as ES modules that the API
// serves from node_modules (api/console.ts). No build step, nothing from another origin.
import htm from '../vendor/htm.mjs';
import { h, render } from '../vendor/preact.mjs';

export { useCallback, useEffect, useMemo, useRef, useState } from '../vendor/hooks.mjs';
export const html = htm.bind(h);
export { render };
