/**
 * Only for the library project (clasp pushes it with Ichido.gs; a project that pastes Ichido.gs
 * does not need it): a library shows its top-level functions to the projects that add it, under
 * their identifier. Added with the identifier "Ichido", a project calls Ichido.connect(...),
 * Ichido.IchidoError, … exactly as a project that pasted Ichido.gs does.
 *
 * A library reads its own Script Properties, not the calling project's: connect with
 *   Ichido.connect({properties: PropertiesService.getScriptProperties()})
 */

/** Ichido.connect(options): see Ichido.gs. */
function connect(options) {
  return Ichido.connect(options);
}

/** The error every call throws (e instanceof Ichido.IchidoError). */
function IchidoError(code, message, status, details) {
  return Ichido.IchidoError(code, message, status, details);
}
IchidoError.prototype = Ichido.IchidoError.prototype;

/** The wait before the n-th retry, without jitter (ms). */
function backoffBaseMs(n) {
  return Ichido.backoffBaseMs(n);
}

/** The Japanese message for an error code ("" for a code without one). */
function messageJa(code) {
  return Ichido.messageJa(code);
}

/** This client's version. */
function version() {
  return Ichido.VERSION;
}
