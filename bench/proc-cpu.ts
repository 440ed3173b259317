import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU time (ms, user + system) used so far by the descendants of this process whose command name
 * starts with `comm` (the embedded PostgreSQL's postmaster and backends: `postgres`), from /proc,
 * including processes of theirs that exited (their reaper's cutime/cstime: the postmaster reaps
 * every backend, so a pool's connections closing meanwhile do not drop out of the sum).
 * Linux only (0 elsewhere).
 */
export function descendantCpuMs(comm: string): number {
  let entries: string[];
  try {
    entries = readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return 0;
  }
  const stats = new Map<number, { ppid: number; comm: string; ms: number }>();
  for (const pid of entries) {
    try {
      const raw = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
      stats.set(Number(pid), {
        ppid: Number(f[1]),
        comm: raw.slice(raw.indexOf('(') + 1, raw.lastIndexOf(')')),
        ms: ((Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 1000) / 100,
      });
    } catch {
      // exited meanwhile
    }
  }
  const ours = (pid: number): boolean => {
    for (let p = stats.get(pid)?.ppid, hops = 0; p && hops < 8; p = stats.get(p)?.ppid, hops++)
      if (p === process.pid) return true;
    return false;
  };
  let ms = 0;
  for (const [pid, st] of stats) if (st.comm.startsWith(comm) && ours(pid)) ms += st.ms;
  return ms;
}
