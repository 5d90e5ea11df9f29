Attribute VB_Name = "SharedMailbox"
' Seed 002 - three colleagues' Outlook clients watch one shared mailbox; ItemAdd fires in every
' one of them for the same new mail, and each forwarded it to the ticket system: three tickets.
' With ichido the mail's Internet Message-ID (the same in every client) is claimed first: one
' client forwards it and records that; the others see "in_progress" or "completed" and skip it.
'
' Outlook must not freeze: in ItemAdd (HandleNewMail) every call is one short attempt (at most
' 3 s); what cannot be done then is left for the retry pass (RetryPendingMails: Alt+F8, a button,
' or the reminder of ThisOutlookSession.cls every 10 minutes), which also takes over mails whose
' client crashed (the claim lapses after LEASE_MS) and mails that arrived while Outlook was closed.
'
' Old mail is never sent again: only mails received in the last KEEP_DAYS days, and not before the
' first run, are looked at. KEEP_DAYS is shorter than the time ichido keeps a completed record
' (30 days unless the namespace says otherwise), so a mail whose record was purged is never seen
' again. The first run (on each PC) leaves the mails already in the mailbox alone; to handle them
' too, set the start date with SetProcessSince before.
'
' Setup: import Ichido.bas, IchidoJson.bas and this module; paste ThisOutlookSession.cls's code
' into ThisOutlookSession; run SetupIchido once on each PC (a writer token of namespace mailbox),
' and SetupRetryReminder once.
Option Explicit

Private Const PR_INTERNET_MESSAGE_ID As String = "http://schemas.microsoft.com/mapi/proptag/0x1035001F"
Private Const SHARED_MAILBOX As String = "support@example.co.jp"
Private Const TICKET_ADDRESS As String = "tickets@example.co.jp"
Private Const LEASE_MS As Long = 300000
Private Const KEEP_DAYS As Long = 7
Public Const RETRY_SUBJECT As String = "ichido retry pass"
Private Const RETRY_MINUTES As Long = 10

' Completions the event handler could not confirm (Dictionaries: key, token, result, lease_end_ms):
' the retry pass records them, before their lease ends, instead of forwarding the mail again.
Private mUnconfirmed As Collection
Private mUnreachable As Boolean

' Asks for ichido's URL and a writer token once and keeps them in this user's registry (not in the
' code, which colleagues share).
Public Sub SetupIchido()
    SaveSetting "ichido", "connection", "url", InputBox("ichido URL (https://...)", "ichido", GetSetting("ichido", "connection", "url", ""))
    SaveSetting "ichido", "connection", "token", InputBox("ichido writer token of namespace mailbox", "ichido")
End Sub

Public Sub ConnectIchido()
    IchidoConnect GetSetting("ichido", "connection", "url", ""), GetSetting("ichido", "connection", "token", ""), "mailbox"
End Sub

' Mails received before `since` (a Date) are never handled. Without it, the first run sets it to
' that moment.
Public Sub SetProcessSince(ByVal since As Double)
    SaveSetting "ichido", "mailbox", "since", CStr(since)
End Sub

' The oldest ReceivedTime handled: the later of the first run (or SetProcessSince) and KEEP_DAYS ago.
Public Function Cutoff() As Double
    Dim raw As String
    Dim since As Double
    raw = GetSetting("ichido", "mailbox", "since", "")
    If raw = "" Then
        since = CDbl(Now)
        SetProcessSince since
        Debug.Print "ichido: first run on this PC: the mails already in the mailbox are left alone"
    Else
        since = CDbl(raw)
    End If
    Cutoff = CDbl(Now) - KEEP_DAYS
    If since > Cutoff Then Cutoff = since
End Function

' ThisOutlookSession's ItemAdd handler: one short attempt per call, never a long wait in Outlook.
Public Sub HandleNewMail(ByVal Item As Object)
    IchidoInEvent True
    HandleSharedMail Item
    IchidoInEvent False
End Sub

' Claims the mail, forwards it and records that. Never raises: what fails is logged (Ctrl+G, the
' Immediate window) and left for the retry pass.
Public Sub HandleSharedMail(ByVal Item As Object)
    Dim messageId As String
    Dim claim As Object
    Dim resultJson As String
    Dim workError As String

    If TypeName(Item) <> "MailItem" Then Exit Sub
    If CDbl(Item.ReceivedTime) < Cutoff() Then Exit Sub
    messageId = Item.PropertyAccessor.GetProperty(PR_INTERNET_MESSAGE_ID)
    If messageId = "" Then Exit Sub

    On Error GoTo Failed
    Set claim = IchidoBegin(messageId, LEASE_MS)
    Select Case claim("outcome")
        Case "completed", "in_progress"
            Exit Sub
        Case "dead"
            Debug.Print "ichido: " & messageId & " failed " & claim("attempts") & " times: " & claim("last_error")
            Exit Sub
    End Select

    On Error GoTo WorkFailed
    resultJson = ForwardToTickets(Item)
    On Error GoTo NotConfirmed
    IchidoComplete messageId, claim("token"), resultJson, claim("lease_end_ms")
    Exit Sub

WorkFailed:
    workError = Err.Description
    Resume RecordFailure
RecordFailure:
    On Error GoTo Failed
    IchidoFail messageId, claim("token"), workError
    Exit Sub

NotConfirmed:
    ' Forwarded, but not recorded: the retry pass records it (never forward it again).
    workError = Err.Description
    If IchidoLastCode = "complete_unconfirmed" Then RememberUnconfirmed messageId, claim("token"), resultJson, claim("lease_end_ms")
    Debug.Print "ichido: " & messageId & ": " & workError
    Exit Sub

Failed:
    ' ichido unreachable or refused: nothing was forwarded twice; the mail is handled later.
    If IchidoLastCode = "unreachable" Then mUnreachable = True
    Debug.Print "ichido: " & messageId & ": " & Err.Description
End Sub

' The work: forward the mail to the ticket system. Returns the result recorded with the claim.
Public Function ForwardToTickets(ByVal mail As Object) As String
    Dim fwd As Object
    Set fwd = mail.Forward
    fwd.To = TICKET_ADDRESS
    fwd.Send
    ForwardToTickets = "{""forwarded_to"":" & JsonString(TICKET_ADDRESS) & "}"
End Function

Private Sub RememberUnconfirmed(ByVal key As String, ByVal token As Double, ByVal resultJson As String, ByVal leaseEndMs As Double)
    Dim entry As Object
    If mUnconfirmed Is Nothing Then Set mUnconfirmed = New Collection
    Set entry = CreateObject("Scripting.Dictionary")
    entry("key") = key
    entry("token") = token
    entry("result") = resultJson
    entry("lease_end_ms") = leaseEndMs
    mUnconfirmed.Add entry
End Sub

' Records the completions ItemAdd could not confirm, each retried until its lease ends.
Private Sub RecordUnconfirmed()
    Dim entry As Object
    If mUnconfirmed Is Nothing Then Exit Sub
    Do While mUnconfirmed.Count > 0
        Set entry = mUnconfirmed(1)
        mUnconfirmed.Remove 1
        On Error Resume Next
        IchidoComplete entry("key"), entry("token"), entry("result"), entry("lease_end_ms")
        If Err.Number <> 0 Then Debug.Print "ichido: " & entry("key") & ": " & Err.Description
        On Error GoTo 0
    Loop
End Sub

' The shared mailbox's inbox.
Public Function SharedInbox() As Object
    Dim mailboxOwner As Object
    Set mailboxOwner = Application.Session.CreateRecipient(SHARED_MAILBOX)
    mailboxOwner.Resolve
    Set SharedInbox = Application.Session.GetSharedDefaultFolder(mailboxOwner, olFolderInbox)
End Function

' The retry pass, without arguments (Alt+F8, a button, the reminder): records what ItemAdd could
' not confirm, then handles the inbox's mails of the last KEEP_DAYS days that are not done.
Public Sub RetryPendingMails()
    RetryPending SharedInbox().Items
End Sub

' The retry pass over folderItems (an Items collection). It stops at the first "unreachable" (the
' next pass tries again), so a server that is down costs one call's retries, not one per mail.
Public Sub RetryPending(ByVal folderItems As Object)
    Dim recent As Object
    Dim i As Long
    IchidoInEvent False
    RecordUnconfirmed
    mUnreachable = False
    ' Restrict wants the date in the user's short date format (Format's "ddddd").
    Set recent = folderItems.Restrict("[ReceivedTime] >= '" & Format(Cutoff(), "ddddd h:nn AMPM") & "'")
    For i = 1 To recent.Count
        HandleSharedMail recent(i)
        If mUnreachable Then Exit For
    Next i
End Sub

' Once per PC: a task whose reminder runs the retry pass (ThisOutlookSession's
' Application_Reminder calls OnReminder), every RETRY_MINUTES minutes.
Public Sub SetupRetryReminder()
    Dim task As Object
    ' 3: olTaskItem
    Set task = Application.CreateItem(3)
    task.Subject = RETRY_SUBJECT
    task.ReminderSet = True
    task.ReminderTime = Now + RETRY_MINUTES / 1440
    task.Save
End Sub

' Application_Reminder: for the retry task, runs the pass and sets the next reminder.
Public Sub OnReminder(ByVal Item As Object)
    If TypeName(Item) <> "TaskItem" Then Exit Sub
    If Item.Subject <> RETRY_SUBJECT Then Exit Sub
    RetryPendingMails
    Item.ReminderSet = True
    Item.ReminderTime = Now + RETRY_MINUTES / 1440
    Item.Save
End Sub
