import { mkdir } from 'node:fs/promises';
import { Injectable, OnModuleInit } from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import { IntakeLimitsConfig, NodeConfig } from '../config/config-slices';
import { isZipUpload } from './job-archive';
import { IntakePart, JobsService, SubmittedJob } from './jobs.service';
import { principalOf } from '../security/principal';
import { publicBaseUrl } from '../common/public-uri';
import {
  applicationNameFromFields,
  callbackUrlFromFields,
  isJobFileField,
  JOB_FILE_FIELD,
  metaFromFields,
  priorityFromFields,
  plainFileName,
} from './form-fields';
import { FormLimits, ReceivedFile, withReceivedForm } from './form-upload';
import { JobSource } from '../queue/queue.types';

/**
 * Browser-form jobs (SPEC §6): the multipart body names the application, the meta and the files
 * in form fields; the job is then submitted like any other multi-file job.
 */
@Injectable()
export class FormJobService implements OnModuleInit {
  constructor(
    private readonly config: IntakeLimitsConfig,
    private readonly node: NodeConfig,
    private readonly jobsService: JobsService,
  ) {}

  /** A bad FORM_TEMP_DIR stops the start-up with its name, rather than failing every upload. */
  async onModuleInit(): Promise<void> {
    const directory = this.config.formTempDir;
    if (directory) {
      try {
        await mkdir(directory, { recursive: true });
      } catch (error) {
        throw new Error(
          `FORM_TEMP_DIR=${directory} cannot be created (${(error as Error).message}): ` +
            'set it to a writable directory, or unset it to use the system temp directory',
        );
      }
    }
  }

  private get limits(): FormLimits {
    return {
      maxFiles: this.config.formMaxFiles,
      maxFields: this.config.formMaxFields,
      maxFieldBytes: this.config.formMaxFieldBytes,
      maxRequestBytes: this.config.maxRequestBytes,
      tempDir: this.config.formTempDir,
    };
  }

  /** Receives the form, validates it whole (400/413) and stores the job. */
  async submit(req: Request): Promise<SubmittedJob> {
    return withReceivedForm(req, this.limits, async (form) => {
      const applicationName = applicationNameFromFields(form.fields);
      const meta = metaFromFields(form.fields);
      const callbackUrl = callbackUrlFromFields(form.fields);
      const callback =
        callbackUrl === null
          ? null
          : { url: callbackUrl, linksBase: publicBaseUrl(req, this.node.publicBaseUrl) };
      if (form.files.length === 0 && !meta.rScript) {
        throw ApiError.badRequest(
          `the form has no job file and no X-SVC-Meta-rScript: choose a file in ${JOB_FILE_FIELD} ` +
            'or name a catalog script.',
        );
      }
      // The parts stay on disk; large ZIP entries are inflated to disk too, and every file is
      // streamed into the database (never whole in memory).
      return this.jobsService.submit({
        applicationName,
        source: JobSource.FORM,
        meta,
        callback,
        parts: form.files.map(jobPart),
        // The intake authorizes it: the guard could not see the application the form names.
        caller: { kind: 'request', principal: principalOf(req) ?? null },
        priority: priorityFromFields(form.fields),
      });
    });
  }
}

/** A form part as a part of the job: a ZIP (by type or name) is exploded, other files kept. */
function jobPart(part: ReceivedFile): IntakePart {
  if (!isJobFileField(part.field)) {
    throw ApiError.badRequest(
      `the form sends a file in the field "${part.field}"; job files go in ${JOB_FILE_FIELD}.`,
    );
  }
  const name = plainFileName(part.originalName);
  return {
    name,
    label: `The file "${name}"`,
    path: part.path,
    zip: isZipUpload(part.originalName, part.mimeType),
  };
}
