/** Meta parameters in the order they were given; names already normalised. */
export type JobMeta = Record<string, string>;

/** Limits that a ZIP must respect before a job is accepted. */
export interface ZipLimits {
  maxEntries: number;
  maxUncompressedBytes: number;
  maxCompressionRatio: number;
}

export const CONFIGURATION_FILE = 'configuration.txt';
export const WELL_KNOWN_META = ['rScript', 'sweaveFile'] as const;
