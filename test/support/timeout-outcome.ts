// The timeout checks' verdict: after `synchronize` on a rank other than the skipper, a SymmTimeoutError
// must name the skipper as the peer and this rank as the waiter, within the deadline plus 5 s.
import { SymmTimeoutError } from "../../src/distributed/sync-watch.js";

export function timeoutOutcome(
  synchronize: () => void,
  o: { rank: number; skipper: number; limitMs: number; startMs: number; what?: string },
): string {
  try {
    synchronize();
    return o.rank === o.skipper ? "skipped" : "NO TIMEOUT";
  } catch (e) {
    const ms = Date.now() - o.startMs;
    if (
      e instanceof SymmTimeoutError &&
      e.record.peer === o.skipper &&
      e.record.rank === o.rank &&
      ms < o.limitMs + 5000
    )
      return `timeout naming rank ${e.record.peer} after ${ms} ms (limit ${o.limitMs} ms)${o.what ? ` in ${o.what}` : ""}: ${e.message.split(".")[0]}`;
    return `WRONG ERROR after ${ms} ms: ${String(e)}`;
  }
}
