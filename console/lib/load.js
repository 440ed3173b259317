// Loading and mutating state for pages: what is loading, what failed, and a reload.
import { useCallback, useEffect, useState } from './html.js';

/** Runs `fn` when `deps` change (or on reload()); `{ data, error, loading, reload }`. */
export function useLoad(fn, deps) {
  const [state, setState] = useState({ loading: true, data: undefined, error: null });
  const [n, setN] = useState(0);

  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    // A promise even when fn throws at once (a path it cannot build): the page shows the error.
    new Promise((ok) => ok(fn())).then(
      (data) => live && setState({ loading: false, data, error: null }),
      (error) => live && setState({ loading: false, data: undefined, error }),
    );
    return () => {
      live = false;
    };
  }, [...deps, n]);
  const reload = useCallback(() => setN((x) => x + 1), []);
  return { ...state, reload };
}

/** A mutation: `run(fn)` sets busy, keeps the API error for display, returns fn's result or undefined. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const run = useCallback(async (fn) => {
    setBusy(true);
    setError(null);
    try {
      return await fn();
    } catch (err) {
      setError(err);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, setError, run };
}

/**
 * A newest-first list page by page (`{ items, next_cursor }`): `{ items, error, loading, more,
 * loadMore, reload }`, where `more` says whether the API has a next page.
 */
export function usePaged(fetchPage, deps) {
  const [state, setState] = useState({ items: [], next: null, loading: true, error: null });
  const [n, setN] = useState(0);

  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    new Promise((ok) => ok(fetchPage(undefined))).then(
      (page) => live && setState({ items: page.items, next: page.next_cursor, loading: false, error: null }),
      (error) => live && setState({ items: [], next: null, loading: false, error }),
    );
    return () => {
      live = false;
    };
  }, [...deps, n]);
  const loadMore = async () => {
    if (!state.next) return;
    try {
      const page = await fetchPage(state.next);
      setState((s) => ({ ...s, items: [...s.items, ...page.items], next: page.next_cursor }));
    } catch (error) {
      setState((s) => ({ ...s, error }));
    }
  };
  const reload = useCallback(() => setN((x) => x + 1), []);
  return { ...state, more: !!state.next, loadMore, reload };
}
