import { readdir, readFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { validateXML, type XMLFileInfo } from 'xmllint-wasm';

const WSDL_DIR = resolve(__dirname, '../../wsdl');

/**
 * Validates `xml` against a schema of `wsdl/` (e.g. `rest-data.xsd`) with libxml2 compiled to
 * WebAssembly, so the drift check needs no native xmllint. The other XSDs of `wsdl/` are
 * preloaded so that `xs:import`/`xs:include` by relative `schemaLocation` resolve as they do
 * when served. Throws if the schema itself cannot be compiled.
 */
export async function validateAgainstSchema(
  xml: string,
  xsdFile: string,
): Promise<{ valid: boolean; errors: string[] }> {
  const schemaName = basename(xsdFile);
  const others = (await readdir(WSDL_DIR)).filter(
    (name) => name.endsWith('.xsd') && name !== schemaName,
  );
  const load = async (name: string): Promise<XMLFileInfo> => ({
    fileName: name,
    contents: await readFile(join(WSDL_DIR, name), 'utf8'),
  });
  const result = await validateXML({
    xml: { fileName: 'document.xml', contents: xml },
    schema: await load(schemaName),
    preload: await Promise.all(others.map(load)),
  });
  return { valid: result.valid, errors: result.errors.map((error) => error.rawMessage) };
}
