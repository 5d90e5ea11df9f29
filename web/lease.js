// A lease as the dashboard words it. Live while its end is ahead of now, the rule the server
// follows (src/core/lease.h): at the end itself it has lapsed. The seconds left round up, so a
// live lease never reads "0 s left"; a lapsed one reads the whole seconds since it lapsed.
export function leaseSeconds(expiresMs, nowMs) {
  const left = expiresMs - nowMs;
  if (left > 0) return { live: true, s: Math.ceil(left / 1000) };
  return { live: false, s: Math.floor((nowMs - expiresMs) / 1000) };
}
