/** The service version, named in every answer's `model`; a test pins it to package.json. */
export const SERVICE_VERSION = "0.1.0";
/** Release date of this decision model version, shown in `GET /v1/models`. */
export const RELEASE_DATE = "2026-11-22";
