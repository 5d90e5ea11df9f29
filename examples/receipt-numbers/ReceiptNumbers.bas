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
    IchidoLanguage "ja"
    On Error GoTo Failed
    For r = 2 To lastRow
        orderId = Trim$(CStr(ws.Cells(r, 1).Value))
        If orderId <> "" Then ws.Cells(r, 2).Value = ReceiptNumberFor(orderId)
    Next r
    Exit Sub
Failed:
    ' The messages are Japanese, written as \uXXXX escapes (IchidoText) so that this file is ASCII
    ' and imports on any Windows: "The receipt numbers ran out. Ask the administrator." and "Row N
    ' got no receipt number: <error>. Running the macro again never gives a number twice."
    If IchidoLastCode = "counter_exhausted" Then
        MsgBox IchidoText("\u53d7\u4ed8\u756a\u53f7\u306e\u4e0a\u9650\u306b\u9054\u3057\u307e\u3057\u305f\u3002\u7ba1\u7406\u8005\u306b\u9023\u7d61\u3057\u3066\u304f\u3060\u3055\u3044\u3002"), vbExclamation
    Else
        MsgBox IchidoText("\u884c ") & r & IchidoText(" \u306e\u53d7\u4ed8\u756a\u53f7\u3092\u767a\u884c\u3067\u304d\u307e\u305b\u3093\u3067\u3057\u305f: ") & Err.Description & vbCrLf & _
               IchidoText("\u3082\u3046\u4e00\u5ea6\u5b9f\u884c\u3057\u3066\u3082\u3001\u756a\u53f7\u304c\u91cd\u8907\u3059\u308b\u3053\u3068\u306f\u3042\u308a\u307e\u305b\u3093\u3002"), vbExclamation
    End If
End Sub

' The button on the sheet.
Public Sub NumberActiveSheet()
    NumberOrders ActiveSheet, ActiveSheet.Cells(ActiveSheet.Rows.Count, 1).End(-4162).Row  ' -4162: xlUp
End Sub
