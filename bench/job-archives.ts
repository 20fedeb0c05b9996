/** The job archives the benchmark submits. */
import { makeZip } from '../test/support/zip-fixtures';

/** The submission benchmark's ZIP size: "1 KB jobs". */
export const SMALL_ZIP_BYTES = 1024;

const NEARLY_NOTHING = 'x <- 1L\n';
const FILLER_LINE = '# svc benchmark: a script that does almost nothing, padded to 1 KB.\n';

/**
 * A ZIP of exactly `SMALL_ZIP_BYTES` bytes holding one R script that does almost nothing: the
 * script is stored (not deflated) and padded with comment lines, so the request body, the stored
 * file and the script are all about 1 KB.
 */
export async function smallScriptZip(): Promise<{ zip: Buffer; script: Buffer }> {
  const overhead = (await makeZip([{ name: 'job.R', content: '', compress: false }])).length;
  const scriptBytes = SMALL_ZIP_BYTES - overhead;
  let script = NEARLY_NOTHING;
  while (script.length + FILLER_LINE.length <= scriptBytes) {
    script = FILLER_LINE + script;
  }
  script = '#'.repeat(scriptBytes - script.length - 1) + '\n' + script;
  const zip = await makeZip([{ name: 'job.R', content: script, compress: false }]);
  if (zip.length !== SMALL_ZIP_BYTES) {
    throw new Error(`the small job ZIP is ${zip.length} bytes, not ${SMALL_ZIP_BYTES}`);
  }
  return { zip, script: Buffer.from(script) };
}

/** The end-to-end job of the benchmark: an R script that writes a PDF plot. */
export const PDF_SCRIPT = 'pdf("plot.pdf")\nplot(1:10)\ninvisible(dev.off())\n';

export async function pdfJobZip(): Promise<Buffer> {
  return makeZip([{ name: 'plot.R', content: PDF_SCRIPT }]);
}
