import type { AppDeps } from '../deps';

/**
 * A workflow's page in the Temporal Web UI (`<base>/namespaces/<ns>/workflows/<id>`), or null when
 * no UI is configured (SWITCHYARD_TEMPORAL_UI_URL) or there is no workflow.
 */
export function temporalUiLink(
  deps: Pick<AppDeps, 'temporalUiUrl' | 'temporalNamespace'>,
  workflowId: string | null,
): string | null {
  if (deps.temporalUiUrl === null || workflowId === null) return null;
  const base = deps.temporalUiUrl.replace(/\/+$/, '');
  return `${base}/namespaces/${encodeURIComponent(deps.temporalNamespace)}/workflows/${encodeURIComponent(workflowId)}`;
}
