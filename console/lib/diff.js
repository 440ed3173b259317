// A line diff (longest common subsequence) for comparing two revisions side by side.

/** Rows `{ left, right, kind }` with kind 'same' | 'changed' | 'removed' | 'added'. */
export function sideBySide(a, b) {
  const x = a.split('\n');
  const y = b.split('\n');
  const n = x.length;
  const m = y.length;
  // lcs[i][j]: length of the LCS of x[i:] and y[j:]
  const lcs = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const rows = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && x[i] === y[j]) {
      rows.push({ left: x[i++], right: y[j++], kind: 'same' });
    } else if (i < n && (j === m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      rows.push({ left: x[i++], right: '', kind: 'removed' });
    } else {
      rows.push({ left: '', right: y[j++], kind: 'added' });
    }
  }
  // A removal directly followed by an addition reads better as one changed row.
  const merged = [];
  for (const r of rows) {
    const prev = merged[merged.length - 1];
    if (r.kind === 'added' && prev?.kind === 'removed' && prev.right === '') {
      prev.right = r.right;
      prev.kind = 'changed';
    } else merged.push(r);
  }
  return merged;
}
