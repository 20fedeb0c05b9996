/** Plain-text tables for the benchmark's stdout. */
import { round, Spread } from './stats';

/** A left-aligned first column and right-aligned others, separated by two spaces. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const line = (cells: string[]): string =>
    cells
      .map((cell, column) =>
        column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]),
      )
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** "median [min–max]" with the given precision; just the median for a single run. */
export function formatSpread(value: Spread, digits = 1): string {
  const text = (n: number): string => (Number.isNaN(n) ? '-' : String(round(n, digits)));
  if (value.runs.length <= 1 || value.min === value.max) {
    return text(value.median);
  }
  return `${text(value.median)} [${text(value.min)}-${text(value.max)}]`;
}

export function heading(title: string): string {
  return `\n${title}\n${'='.repeat(title.length)}`;
}
