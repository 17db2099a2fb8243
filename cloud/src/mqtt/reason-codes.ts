import { ReasonCode } from '../../../shared/mqtt.ts';
import { ApiError, DatabaseUnavailable } from '../errors.ts';
import { isConnectionError } from '../storage/database.ts';

/**
 * The one translation of the service's typed errors into MQTT 5 PUBACK/PUBREC reason codes
 * (docs/api/mqtt.md, "PUBACK reason codes"), as `http/error-handler.ts` is
 * for HTTP. The reason string starts with the error code of the HTTP API.
 */
export interface PublishAnswer {
  reasonCode: number;
  reasonString: string;
}

const BY_CODE: Record<string, number> = {
  invalid_topic: ReasonCode.topicNameInvalid,
  rate_limited: ReasonCode.quotaExceeded,
  overloaded: ReasonCode.quotaExceeded,
  out_of_range: ReasonCode.implementationSpecificError,
  unknown_kind: ReasonCode.implementationSpecificError,
};

export function publishAnswerFor(thrown: unknown): PublishAnswer {
  // The database out of reach is named as HTTP names it (503 `db_unavailable`): the sender retries.
  const err = isConnectionError(thrown) ? new DatabaseUnavailable(thrown) : thrown;
  if (!(err instanceof ApiError)) {
    return {
      reasonCode: ReasonCode.unspecifiedError,
      reasonString: 'internal: the service could not store this; retry',
    };
  }
  const mapped = BY_CODE[err.code];
  let reasonCode: number;
  if (mapped !== undefined) reasonCode = mapped;
  else if (err.status === 400) reasonCode = ReasonCode.payloadFormatInvalid;
  else if (err.status === 422) reasonCode = ReasonCode.implementationSpecificError;
  else if (err.status === 401 || err.status === 403 || err.status === 404)
    reasonCode = ReasonCode.notAuthorized;
  else reasonCode = ReasonCode.unspecifiedError;
  return { reasonCode, reasonString: `${err.code}: ${err.message}` };
}
