Attribute VB_Name = "ReceiptNumbers"
' Seed 000 in Excel - receipt numbers for the order rows of a shared workbook, from several PCs.
' Each row gets its number from ichido, keyed by its order id: running the macro again, on another
' PC or after a crash, gives every row the same number; no number is issued twice or skipped.
' Column A: order id. Column B: the receipt number (written by the macro).
'
' Setup: import Ichido.bas, IchidoJson.bas and this module; run SetupIchido once per PC; an admin
' creates the counter:  ichido counter create receipts --ns shop --max 9999 --format 'R-{seq:4}' --require-key
Option Explicit

Public Sub SetupIchido()
    SaveSetting "ichido", "connection", "url", InputBox("ichido URL (https://...)", "ichido", GetSetting("ichido", "connection", "url", ""))
    SaveSetting "ichido", "connection", "token", InputBox("ichido writer token of namespace shop", "ichido")
End Sub

' The number for one order (the same order id always gets the same number).
Public Function ReceiptNumberFor(ByVal orderId As String) As String
    Dim n As Object
    Set n = IchidoNextNumber("receipts", "order-" & orderId)
    ReceiptNumberFor = n("formatted")
End Function

' Numbers every order row of the sheet that has an order id (rows 2..lastRow).
Public Sub NumberOrders(ByVal ws As Object, ByVal lastRow As Long)
    Dim r As Long
    Dim orderId As String
    IchidoConnect GetSetting("ichido", "connection", "url", ""), GetSetting("ichido", "connection", "token", ""), "shop"
    On Error GoTo Failed
    For r = 2 To lastRow
        orderId = Trim$(CStr(ws.Cells(r, 1).Value))
        If orderId <> "" Then ws.Cells(r, 2).Value = ReceiptNumberFor(orderId)
    Next r
    Exit Sub
Failed:
    If IchidoLastCode = "counter_exhausted" Then
        MsgBox "受付番号の上限に達しました。管理者に連絡してください。", vbExclamation
    Else
        MsgBox "行 " & r & " の受付番号を発行できませんでした: " & Err.Description & vbCrLf & _
               "もう一度実行しても、番号が重複することはありません。", vbExclamation
    End If
End Sub

' The button on the sheet.
Public Sub NumberActiveSheet()
    NumberOrders ActiveSheet, ActiveSheet.Cells(ActiveSheet.Rows.Count, 1).End(-4162).Row  ' -4162: xlUp
End Sub
