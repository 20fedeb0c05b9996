import { Logger } from '@nestjs/common';
import type { REngineConfig } from '../config/config-slices';
import { NativeREngine } from './native/native-r.engine';
import { findRscript, type NativeRConfig } from './launch/r-location';
import type { REngine } from './r-engine';
import { WebREngine } from './webr/webr.engine';
import type { WebRConfig } from './webr/webr-evaluation';

export interface REngineLogger {
  log(message: string): void;
  warn(message: string): void;
}

/** What the factory reads: R_ENGINE, and what the engine it makes reads. */
export type REngineOptions = Pick<REngineConfig, 'rEngine'> & NativeRConfig & WebRConfig;

/**
 * Chooses the engine R_ENGINE asks for. `auto` takes native R when an Rscript is found, else
 * webR; but when RSCRIPT_PATH or R_HOME is set, the operator meant native R, so a wrong path
 * fails at start-up with a clear line instead of quietly falling back to webR.
 */
export function createREngine(
  config: REngineOptions,
  logger: REngineLogger = new Logger('REngine'),
): REngine {
  switch (config.rEngine) {
    case 'native':
      return new NativeREngine(config);
    case 'webr':
      return new WebREngine(config);
    case 'auto': {
      if (config.rscriptPath || config.rHome) {
        return new NativeREngine(config);
      }
      const rscript = findRscript(config);
      if (rscript) {
        logger.log(`R_ENGINE=auto: using native R (${rscript})`);
        return new NativeREngine(config);
      }
      logger.warn('R_ENGINE=auto: no Rscript on PATH, using webR (base R only, slower)');
      return new WebREngine(config);
    }
  }
}
