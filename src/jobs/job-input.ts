/** A file of a multi-file job held in memory: a plain name (no directories) and its bytes. */
export interface JobFileContent {
  name: string;
  content: Buffer;
}

/** A file of a multi-file job on disk: streamed into the database when the job is stored. */
export interface JobFilePath {
  name: string;
  path: string;
}

/** A file of a multi-file job as a front end hands it over: in memory or on disk. */
export type JobFileInput = JobFileContent | JobFilePath;

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
