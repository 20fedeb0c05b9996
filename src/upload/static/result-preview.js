// The files of a job's ZIP result shown in the page (text, images, PDFs), read with fflate in
// the browser. Shared by the upload page and the operator console; a file from R is shown as
// text, an image or a blob: frame, never as HTML of this page.
'use strict';

window.svcResultPreview = (function () {
  /** Results up to this size are opened in the page; larger ones are only offered for download. */
  const PREVIEW_MAX_BYTES = 20 * 1024 * 1024;
  /** A text file shows at most this much. */
  const PREVIEW_TEXT_BYTES = 64 * 1024;
  const IMAGE_TYPES = {
    png: 'image/png',
    jpg: 'image/jpeg',
    jpeg: 'image/jpeg',
    gif: 'image/gif',
    svg: 'image/svg+xml',
    webp: 'image/webp',
  };
  const TEXT_EXTENSIONS = new Set(
    'txt csv tsv r rout log md json xml html htm tex rd rmd yaml yml sql dat out'.split(' '),
  );
  /** Blob URLs of the last preview, released when the next one is shown. */
  let previewUrls = [];

  function megabytes(bytes) {
    if (bytes < 1e3) {
      return `${bytes} byte${bytes === 1 ? '' : 's'}`;
    }
    return bytes < 1e6 ? `${(bytes / 1e3).toFixed(1)} kB` : `${(bytes / 1e6).toFixed(1)} MB`;
  }

  function extensionOf(name) {
    const dot = name.lastIndexOf('.');
    return dot < 0 ? '' : name.slice(dot + 1).toLowerCase();
  }

  /**
   * Lists the files of a ZIP result (`result.dataUri`) in `list` and shows its text files, images
   * and PDFs inline; `message` says how it went. `isCurrent()` false: a newer preview took over.
   * `describeError(response)` words a refused download.
   */
  async function show(result, { list, message, isCurrent, describeError }) {
    previewUrls.forEach((url) => URL.revokeObjectURL(url));
    previewUrls = [];
    list.replaceChildren();
    if (typeof fflate === 'undefined') {
      message.textContent = 'The preview could not be loaded; download the result instead.';
      return;
    }
    message.textContent = 'Opening the result…';
    let files;
    try {
      const response = await fetch(result.dataUri);
      const size = Number(response.headers.get('Content-Length'));
      if (!response.ok) {
        message.textContent = describeError(response);
        return;
      }
      if (size > PREVIEW_MAX_BYTES) {
        message.textContent = `The result is ${megabytes(size)}, too large to show here: download it.`;
        return;
      }
      files = fflate.unzipSync(new Uint8Array(await response.arrayBuffer()));
    } catch (error) {
      message.textContent = `The result could not be opened (${error.message}).`;
      return;
    }
    if (!isCurrent()) {
      return;
    }
    const names = Object.keys(files).filter((name) => !name.endsWith('/'));
    message.textContent =
      names.length === 0
        ? 'The result holds no files.'
        : `${names.length} file${names.length === 1 ? '' : 's'}; text files, images and PDFs are shown below.`;
    list.replaceChildren(...names.map((name) => previewItem(name, files[name])));
  }

  function previewItem(name, bytes) {
    const item = document.createElement('li');
    item.className = 'preview-file';
    item.dataset.name = name;
    const heading = document.createElement('h4');
    const code = document.createElement('code');
    code.textContent = name;
    heading.append(code, ` (${megabytes(bytes.length)})`);
    item.append(heading);
    const extension = extensionOf(name);
    if (IMAGE_TYPES[extension]) {
      const image = document.createElement('img');
      image.alt = `The image ${name} from the result`;
      image.src = blobUrl(bytes, IMAGE_TYPES[extension]);
      item.append(image);
    } else if (extension === 'pdf') {
      const frame = document.createElement('iframe');
      frame.title = `The PDF ${name} from the result`;
      frame.src = blobUrl(bytes, 'application/pdf');
      item.append(frame);
    } else if (TEXT_EXTENSIONS.has(extension)) {
      const pre = document.createElement('pre');
      pre.className = 'preview-text';
      pre.tabIndex = 0;
      pre.setAttribute('aria-label', `The text of ${name}`);
      // Shown as text (never as HTML): a file from R cannot run script in this page.
      const shown = new TextDecoder('utf-8').decode(bytes.subarray(0, PREVIEW_TEXT_BYTES));
      pre.textContent =
        bytes.length > PREVIEW_TEXT_BYTES ? `${shown}\n… (the rest is in the download)` : shown;
      item.append(pre);
    }
    return item;
  }

  function blobUrl(bytes, type) {
    const url = URL.createObjectURL(new Blob([bytes], { type }));
    previewUrls.push(url);
    return url;
  }

  return { show, megabytes };
})();
