/**
 * Seed 001 — an AppSheet bot calls this script, and a Grouped Action fires it several times for
 * the same row. LockService alone does not stop the second run, and a status column read under the
 * lock only works if the write is flushed before the lock is released. ichido's once() is that
 * lock, status guard and flush in one durable call: the first execution does the work and stores
 * its result; the others get the stored result (waiting up to WAIT_MS for it); an execution killed
 * at the time limit loses its claim when LEASE_MS lapses, and the next firing takes over.
 *
 * Setup (once):
 *   - an admin creates the invoice counter:
 *       ichido counter create invoices --ns appsheet --format 'INV-{yyyy}-{seq:4}' --period year \
 *         --timezone Asia/Tokyo --require-key
 *   - Script Properties (Project Settings > Script Properties): ICHIDO_URL, ICHIDO_TOKEN (a writer
 *     token of namespace appsheet), ICHIDO_NS = appsheet, ADMIN_EMAIL (who hears about stuck rows)
 *   - Ichido.gs pasted into the project, or the library added with the identifier "Ichido"
 *     (connect() below passes this project's properties, which a library cannot read itself)
 *   - AppSheet bot task "Call a script": handleRecord([Row ID], [Customer email], [Amount])
 *   - run installSweeper() once (a time-driven trigger every 10 minutes)
 */

// Longer than Apps Script's 6-minute execution limit: a running execution never loses its claim
// to a second firing, and one killed at the limit loses it a minute later.
var LEASE_MS = 7 * 60 * 1000;
var WAIT_MS = 20000; // a duplicate firing waits this long for the first one's result

function connect() {
  return Ichido.connect({ properties: PropertiesService.getScriptProperties() });
}

function handleRecord(rowId, customerEmail, amount) {
  var ichido = connect();
  var key = 'appsheet-row-' + rowId; // names the row, not the call
  return ichido.once(key, function () {
    // Numbered with the same key: a crash after this line does not burn an invoice number.
    var invoice = ichido.nextNumber('invoices', key);
    MailApp.sendEmail(customerEmail, '請求書 ' + invoice.formatted,
      'ご請求金額: ' + amount + ' 円 (請求書番号 ' + invoice.formatted + ')');
    return { invoiceNo: invoice.formatted };
  }, {
    leaseMs: LEASE_MS,
    waitMs: WAIT_MS,
    // The same row id with other content is refused (fingerprint_mismatch), not silently skipped.
    fingerprint: ichido.fingerprint([rowId, customerEmail, amount]),
  });
}

/**
 * Time-driven: mails the admin the rows whose execution died before completing them (expired:
 * the next firing takes each over) and the rows that failed too often (dead: never tried again
 * until an admin resets them on the dashboard's Once page).
 */
function sweepStuckRecords() {
  var ichido = connect();
  var stuck = ichido.expired(50);
  var dead = ichido.dead(50);
  if (stuck.length + dead.length > 0) {
    var lines = stuck.map(function (r) {
      return r.key + ' (attempt ' + r.attempt + ', ' + r.owner + ', lease ended ' + r.lease_expires_at + ')';
    });
    var deadLines = dead.map(function (r) {
      return r.key + ' (dead after ' + r.attempt + ' attempts: ' + r.last_error + ')';
    });
    var parts = [];
    if (lines.length) parts.push('Stuck (the next firing of each row takes it over; to force it, re-run the bot for the row):\n' + lines.join('\n'));
    if (deadLines.length) parts.push('Dead (fix the cause, then Reset each on the dashboard: Once, state dead):\n' + deadLines.join('\n'));
    MailApp.sendEmail(PropertiesService.getScriptProperties().getProperty('ADMIN_EMAIL'),
      'ichido: ' + stuck.length + ' row(s) stuck, ' + dead.length + ' dead', parts.join('\n\n'));
  }
  return stuck.length + dead.length;
}

function installSweeper() {
  ScriptApp.newTrigger('sweepStuckRecords').timeBased().everyMinutes(10).create();
}
