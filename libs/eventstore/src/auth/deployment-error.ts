/** A deployment folder that cannot be used as asked (another prefix's, a record that cannot be read, an unknown principal). */
export class DeploymentError extends Error {
  override name = 'DeploymentError';
}
