/** What R code in a job last said of its progress with svc_progress (r/svc-env.R). */
export interface JobProgress {
  /** From 0 to 1. */
  fraction: number;
  /** At most 500 characters; empty when none was given. */
  message: string;
}

/** How a printed report starts: ASCII record separator, then a word no script prints by chance. */
const PRINTED_PROGRESS = '\u001esvc-progress ';

/** The progress a line of R's output reports, or null when it is an ordinary line. */
export function printedProgress(line: string): JobProgress | null {
  if (!line.startsWith(PRINTED_PROGRESS)) {
    return null;
  }
  const rest = line.slice(PRINTED_PROGRESS.length);
  const space = rest.indexOf(' ');
  const fraction = Number(space < 0 ? rest : rest.slice(0, space));
  if (!Number.isFinite(fraction) || fraction < 0 || fraction > 1) {
    return null;
  }
  return { fraction, message: space < 0 ? '' : rest.slice(space + 1, space + 1 + 500) };
}

/**
 * An output callback that passes ordinary lines to `onOutput` and progress reports to
 * `onProgress`, so that every engine routes R's output the same way.
 */
export function routeOutput(request: {
  onOutput?: (stream: 'stdout' | 'stderr', line: string) => void;
  onProgress?: (progress: JobProgress) => void;
}): ((stream: 'stdout' | 'stderr', line: string) => void) | undefined {
  const { onOutput, onProgress } = request;
  if (!onOutput && !onProgress) {
    return undefined;
  }
  return (stream, line) => {
    // A report printed after output that did not end its line (cat("x"); svc_progress(1)).
    const at = line.indexOf(PRINTED_PROGRESS);
    const progress = at >= 0 ? printedProgress(line.slice(at)) : null;
    if (!progress) {
      onOutput?.(stream, line);
      return;
    }
    if (at > 0) {
      onOutput?.(stream, line.slice(0, at));
    }
    onProgress?.(progress);
  };
}
