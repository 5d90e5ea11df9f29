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
 *   - Script Properties: ICHIDO_URL, ICHIDO_TOKEN (a writer token of namespace appsheet),
 *     ICHIDO_NS = appsheet, ADMIN_EMAIL (who hears about stuck rows)
 *   - AppSheet bot task "Call a script": handleRecord([Row ID], [Customer email], [Amount])
 *   - run installSweeper() once (a time-driven trigger every 10 minutes)
 */

var LEASE_MS = 5 * 60 * 1000; // longer than the work; an execution that dies loses the claim after it
var WAIT_MS = 20000; // a duplicate firing waits this long for the first one's result

function handleRecord(rowId, customerEmail, amount) {
  var ichido = Ichido.connect();
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

/** Time-driven: mails the admin the rows whose execution died before completing them. */
function sweepStuckRecords() {
  var stuck = Ichido.connect().expired(50);
  if (stuck.length > 0) {
    var lines = stuck.map(function (r) {
      return r.key + ' (attempt ' + r.attempt + ', ' + r.owner + ', lease ended ' + r.lease_expires_at + ')';
    });
    MailApp.sendEmail(PropertiesService.getScriptProperties().getProperty('ADMIN_EMAIL'),
      'ichido: ' + stuck.length + ' row(s) stuck', lines.join('\n') +
      '\n\nThe next firing of each row takes it over; to force it, re-run the bot for the row.');
  }
  return stuck.length;
}

function installSweeper() {
  ScriptApp.newTrigger('sweepStuckRecords').timeBased().everyMinutes(10).create();
}
