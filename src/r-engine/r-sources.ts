import { join } from 'node:path';

/** Path of one of the service's own R programs (`src/r-engine/r/`, copied beside the build). */
export function rSourcePath(file: string): string {
  return join(__dirname, 'r', file);
}
