import { deploymentStreamNames } from '../topology';
import type { NatsHandle } from '../connection';
import { jsErrCode, JsErrCode } from '../errors';

/*
 * Removing what a spec's throwaway prefix left on the shared NATS: for the integration specs of
 * every project (the SDK's among them, which may not depend on @baton/testing) and for
 * libs/testing's cleanupDeployment. Not exported from @baton/eventstore.
 */

/**
 * Delete a deployment's streams only (`deploymentStreamNames(prefix)`), for specs that wrote no
 * Redis keys; a stream that could not be deleted is an error naming it, as in {@link cleanupDeployment}.
 */
export async function removeDeploymentStreams(nats: Pick<NatsHandle, 'jsm'>, prefix: string): Promise<void> {
  const left = await deleteStreams(nats, deploymentStreamNames(prefix));
  if (left.length > 0) throw new Error(`cleanup left ${left.length} stream(s) of ${prefix} on NATS: ${left.join('; ')}`);
}

/** How many times {@link deleteStreams} asks to delete one stream before it gives up on it. */
export const STREAM_DELETE_ATTEMPTS = 3;

/**
 * Delete the streams named; one that is not there counts as deleted. A delete that fails otherwise
 * (a JetStream request that timed out on a loaded server, a leader election) is asked again, up to
 * {@link STREAM_DELETE_ATTEMPTS} times, a little later each time. Returns the streams still there,
 * each with the last failure (empty when every one is gone).
 */
export async function deleteStreams(nats: Pick<NatsHandle, 'jsm'>, names: readonly string[]): Promise<string[]> {
  const left: string[] = [];
  for (const name of names) {
    for (let attempt = 1; ; attempt++) {
      try {
        await nats.jsm.streams.delete(name);
        break;
      } catch (error) {
        if (jsErrCode(error) === JsErrCode.streamNotFound) break;
        if (attempt >= STREAM_DELETE_ATTEMPTS) {
          left.push(`${name} (${error instanceof Error ? error.message : String(error)})`);
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
      }
    }
  }
  return left;
}
