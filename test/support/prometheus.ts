// parse-prometheus-text-format ships no types; this is the part of its output the tests read.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const parsePrometheusTextFormat = require('parse-prometheus-text-format') as (
  text: string,
) => PrometheusFamily[];

export interface PrometheusSample {
  labels?: Record<string, string>;
  /** Counters and gauges. */
  value?: string;
  /** Histograms. */
  count?: string;
  sum?: string;
  buckets?: Record<string, string>;
}

export interface PrometheusFamily {
  name: string;
  help: string;
  type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  metrics: PrometheusSample[];
}

/** Parses a /metrics answer with a Prometheus text-format parser (throws on malformed text). */
export function parseMetrics(text: string): Map<string, PrometheusFamily> {
  return new Map(parsePrometheusTextFormat(text).map((family) => [family.name, family]));
}

/**
 * The `_count` of one labelled series of a histogram. The parser merges a histogram's labelled
 * series into one (it keeps only the buckets), so this reads the series' own sample line.
 */
export function histogramCount(
  text: string,
  family: string,
  labels: Record<string, string>,
): number | undefined {
  for (const line of text.split('\n')) {
    const match = new RegExp(`^${family}_count\\{([^}]*)\\} (\\S+)$`).exec(line);
    if (!match) {
      continue;
    }
    const present = new Map(
      [...match[1].matchAll(/(\w+)="([^"]*)"/g)].map(([, name, value]) => [name, value]),
    );
    if (Object.entries(labels).every(([name, value]) => present.get(name) === value)) {
      return Number(match[2]);
    }
  }
  return undefined;
}

/** The sample of `family` whose labels include `labels`, if any. */
export function sample(
  families: Map<string, PrometheusFamily>,
  family: string,
  labels: Record<string, string> = {},
): PrometheusSample | undefined {
  return families
    .get(family)
    ?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
}
