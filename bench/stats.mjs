// Percentiles of a list of samples, as the Node benchmarks print them
// (nearest rank), shared by bench/e2b and bench/ports.
export function stats(v) {
  const s = [...v].sort((a, b) => a - b)
  const at = (q) => (s.length ? s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] : 0)
  return { n: s.length, p50: at(0.5), p99: at(0.99), max: s.length ? s[s.length - 1] : 0 }
}
