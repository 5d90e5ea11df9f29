"""Python stand-ins for the Office objects the VBA examples touch (Outlook's MailItem and Items,
Excel's Worksheet), recording what the code did with them."""

from __future__ import annotations

import datetime
import re
import threading
from typing import Any, Callable, Dict, List, Optional

from vba import EMPTY, VbaError, VbObject, ole_date, to_long, to_str

PR_INTERNET_MESSAGE_ID = "http://schemas.microsoft.com/mapi/proptag/0x1035001F"


class PropertyAccessor(VbObject):
    type_name = "PropertyAccessor"

    def __init__(self, props: Dict[str, Any]) -> None:
        self.props = props

    def vba_get(self, name: str, args: List[Any]) -> Any:
        if name == "getproperty":
            key = to_str(args[0])
            if key not in self.props:
                raise VbaError(-2147221233, f"The property {key} is unknown or cannot be found")
            return self.props[key]
        return super().vba_get(name, args)


class SentMail(VbObject):
    """A forward being written; Send calls on_send(self)."""

    type_name = "MailItem"

    def __init__(self, original: "MailItem", on_send: Callable[["SentMail"], None]) -> None:
        self.original = original
        self.to = ""
        self.on_send = on_send

    def vba_get(self, name: str, args: List[Any]) -> Any:
        if name == "send":
            self.on_send(self)
            return EMPTY
        if name == "to":
            return self.to
        return super().vba_get(name, args)

    def vba_let(self, name: str, args: List[Any], value: Any) -> None:
        if name == "to":
            self.to = to_str(value)
            return
        super().vba_let(name, args, value)


class MailItem(VbObject):
    type_name = "MailItem"

    def __init__(self, message_id: str, subject: str, on_send: Callable[[SentMail], None], received: Optional[datetime.datetime] = None) -> None:
        self.message_id = message_id
        self.subject = subject
        self.accessor = PropertyAccessor({PR_INTERNET_MESSAGE_ID: message_id})
        self.on_send = on_send
        self.received = received or datetime.datetime.now()

    def vba_get(self, name: str, args: List[Any]) -> Any:
        if name == "propertyaccessor":
            return self.accessor
        if name == "receivedtime":
            return ole_date(self.received)
        if name == "subject":
            return self.subject
        if name == "forward":
            return SentMail(self, self.on_send)
        return super().vba_get(name, args)


class Items(VbObject):
    type_name = "Items"

    def __init__(self, items: List[Any]) -> None:
        self.items = items

    def vba_get(self, name: str, args: List[Any]) -> Any:
        if name == "count":
            return len(self.items)
        if name == "item":
            i = to_long(args[0])
            if not 1 <= i <= len(self.items):
                raise VbaError(-2147352567, "Array index out of bounds")
            return self.items[i - 1]
        if name == "restrict":
            return Items([m for m in self.items if self._matches(to_str(args[0]), m)])
        return super().vba_get(name, args)

    @staticmethod
    def _matches(flt: str, item: Any) -> bool:
        """Outlook's Jet filter "[ReceivedTime] >= 'DATE'" with DATE in the user's short date
        format, as Format(d, "ddddd h:nn AMPM") writes it in Japanese (ja-JP) Windows; Outlook
        refuses what it cannot parse, and so does this."""
        m = re.fullmatch(r"\[ReceivedTime\] >= '(\d{4})/(\d{2})/(\d{2}) (\d{1,2}):(\d{2}) (午前|午後)'", flt)
        if not m:
            raise VbaError(-2147352567, f"Cannot parse condition. Error at \"{flt}\".")
        y, mo, d, h, mi, ampm = m.groups()
        hour = int(h) % 12 + (12 if ampm == "午後" else 0)
        since = datetime.datetime(int(y), int(mo), int(d), hour, int(mi))
        return item.received >= since

    def vba_iter(self) -> List[Any]:
        return list(self.items)


class Cell(VbObject):
    type_name = "Range"

    def __init__(self, sheet: "Worksheet", row: int, col: int) -> None:
        self.sheet, self.row, self.col = sheet, row, col

    def vba_get(self, name: str, args: List[Any]) -> Any:
        if name == "value":
            return self.sheet.cells.get((self.row, self.col), EMPTY)
        if name == "row":
            return self.row
        return super().vba_get(name, args)

    def vba_let(self, name: str, args: List[Any], value: Any) -> None:
        if name == "value":
            with self.sheet.lock:
                self.sheet.cells[(self.row, self.col)] = value
            return
        super().vba_let(name, args, value)


class Worksheet(VbObject):
    type_name = "Worksheet"

    def __init__(self, cells: Optional[Dict[Any, Any]] = None) -> None:
        self.cells: Dict[Any, Any] = dict(cells or {})
        self.lock = threading.Lock()

    def vba_get(self, name: str, args: List[Any]) -> Any:
        if name == "cells":
            return Cell(self, to_long(args[0]), to_long(args[1]))
        return super().vba_get(name, args)
