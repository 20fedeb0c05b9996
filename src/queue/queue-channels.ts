/**
 * The queue's notification channels: what each payload says. The queue's statements send them
 * themselves (delivered at commit); QueueNotifier delivers them in this process and from other
 * nodes.
 */

/*
 * The statements below send their notifications themselves (delivered at commit), each payload
 * after this node's prefix (`<node id> `, see DatabaseEvents): this node delivers them in-process
 * (QueueNotifier) and ignores their echo.
 */

/** Payload: the queued job's kind (script, xml, json, or mail_reply for a reply owed), so a worker claims only for slots that can take it. */
export const JOB_QUEUED_CHANNEL = 'svc_job_queued';
/** Payload: the job id, once its result is stored (sent by the statement that stores it). */
export const RESULT_READY_CHANNEL = 'svc_result_ready';
/** Payload: the ids of the jobs one claim started, comma-separated (sent by the claim). */
export const JOB_STARTED_CHANNEL = 'svc_job_started';
/** A job's callback was queued (its result stored): wakes the workers' callback slots. */
export const CALLBACK_QUEUED_CHANNEL = 'svc_callback_queued';
/**
 * Payload: the job id, after lines were appended to its log (sent by the statement that appends
 * them, JobLogRepository.append): wakes the live streams of the log.
 */
export const JOB_LOG_CHANNEL = 'svc_job_log';
