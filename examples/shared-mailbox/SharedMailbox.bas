Attribute VB_Name = "SharedMailbox"
' Seed 002 - three colleagues' Outlook clients watch one shared mailbox; ItemAdd fires in every
' one of them for the same new mail, and each forwarded it to the ticket system: three tickets.
' With ichido the mail's Internet Message-ID (the same in every client) is claimed first: one
' client forwards it and records that; the others see "in_progress" or "completed" and skip it.
' A client that crashes (or is closed) mid-way loses its claim when LEASE_MS lapses, and the mail
' is picked up again by the next client that sees it (RetryPending, e.g. from a reminder).
'
' Setup: import Ichido.bas, IchidoJson.bas and this module; paste ThisOutlookSession.cls's code
' into ThisOutlookSession; run SetupIchido once on each PC (a writer token of namespace mailbox).
Option Explicit

Private Const PR_INTERNET_MESSAGE_ID As String = "http://schemas.microsoft.com/mapi/proptag/0x1035001F"
Private Const TICKET_ADDRESS As String = "tickets@example.co.jp"
Private Const LEASE_MS As Long = 300000

' Asks for ichido's URL and a writer token once and keeps them in this user's registry (not in the
' code, which colleagues share).
Public Sub SetupIchido()
    SaveSetting "ichido", "connection", "url", InputBox("ichido URL (https://...)", "ichido", GetSetting("ichido", "connection", "url", ""))
    SaveSetting "ichido", "connection", "token", InputBox("ichido writer token of namespace mailbox", "ichido")
End Sub

Public Sub ConnectIchido()
    IchidoConnect GetSetting("ichido", "connection", "url", ""), GetSetting("ichido", "connection", "token", ""), "mailbox"
End Sub

' Called from ThisOutlookSession's ItemAdd handler for every new item of the shared inbox.
Public Sub HandleSharedMail(ByVal Item As Object)
    Dim messageId As String
    Dim claim As Object
    Dim resultJson As String
    Dim workError As String

    If TypeName(Item) <> "MailItem" Then Exit Sub
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
    On Error GoTo Failed
    IchidoComplete messageId, claim("token"), resultJson, claim("lease_end_ms")
    Exit Sub

WorkFailed:
    workError = Err.Description
    Resume RecordFailure
RecordFailure:
    On Error GoTo Failed
    IchidoFail messageId, claim("token"), workError
    Exit Sub

Failed:
    ' ichido unreachable or refused: nothing was forwarded twice; the mail is handled later.
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

' Handles the inbox's mails again (skipping what is done): for mails whose client crashed, and
' for mails that arrived while Outlook was closed. Run it from a button or a reminder.
Public Sub RetryPending(ByVal items As Object)
    Dim i As Long
    For i = 1 To items.Count
        HandleSharedMail items(i)
    Next i
End Sub
