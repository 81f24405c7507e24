"""SQL text helpers for the counting benches: split a query string into its statements, read
the statements a PostgreSQL server logged (`log_statement = all`, stderr format).

`split_statements` knows enough of PostgreSQL's lexer for what drivers send: '…' strings
('' inside), E'…' strings (backslash escapes), "quoted identifiers", $tag$…$tag$ bodies and
-- / /* */ comments; a `;` inside any of them does not split. Empty statements are dropped.
"""

from __future__ import annotations

import re

_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_ENTRY = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \S+) \[(\d+)\] db=(\S*) (\w+):  (.*)$")
_REQUEST = re.compile(r"^(?:statement|execute [^:]*): (.*)$", re.DOTALL)
TRANSACTION_CONTROL = ("BEGIN", "START TRANSACTION", "COMMIT", "END", "ROLLBACK", "ABORT")


def split_statements(sql: str) -> list[str]:
    out: list[str] = []
    start, i, n = 0, 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "'":
            escaped = i > 0 and sql[i - 1] in "eE" and (i < 2 or not (sql[i - 2].isalnum() or sql[i - 2] == "_"))
            i += 1
            while i < n:
                if escaped and sql[i] == "\\":
                    i += 2
                    continue
                if sql[i] == "'":
                    if i + 1 < n and sql[i + 1] == "'":
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        elif c == '"':
            end = sql.find('"', i + 1)
            while end != -1 and end + 1 < n and sql[end + 1] == '"':
                end = sql.find('"', end + 2)
            i = n if end == -1 else end + 1
        elif c == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end == -1 else end + 1
        elif c == "/" and sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end == -1 else end + 2
        elif c == "$" and (m := _DOLLAR.match(sql, i)) and not (i > 0 and (sql[i - 1].isalnum() or sql[i - 1] == "_")):
            tag = m.group(0)
            end = sql.find(tag, m.end())
            i = n if end == -1 else end + len(tag)
        elif c == ";":
            out.append(sql[start:i])
            i += 1
            start = i
        else:
            i += 1
    out.append(sql[start:])
    return [s.strip() for s in out if s.strip()]


def is_transaction_control(statement: str) -> bool:
    head = statement.lstrip().upper()
    return any(head == word or head.startswith(word + " ") or head.startswith(word + ";")
               for word in TRANSACTION_CONTROL)


def logged_requests(log_text: str, database: str) -> list[dict[str, str]]:
    """Every request (one round trip: a simple query, or an extended-protocol execute) the server
    logged for `database`, in order: {"pid", "sql"}. Continuation lines (a tab first) are joined."""
    entries: list[list[str]] = []
    for line in log_text.splitlines():
        if line.startswith("\t") and entries:
            entries[-1].append(line[1:])
            continue
        entries.append([line])
    out = []
    for lines in entries:
        m = _ENTRY.match(lines[0])
        if not m or m.group(3) != database or m.group(4) != "LOG":
            continue
        message = "\n".join([m.group(5), *lines[1:]])
        request = _REQUEST.match(message)
        if request:
            out.append({"pid": m.group(2), "sql": request.group(1)})
    return out


# The referential-integrity check PostgreSQL runs for a foreign key (Django's are DEFERRABLE
# INITIALLY DEFERRED, so they run at COMMIT, as top-level statements pg_stat_statements sees).
_FK_CHECK = re.compile(r'^SELECT 1 FROM ONLY "[^"]+"\."[^"]+" x WHERE .* FOR KEY SHARE OF x$', re.DOTALL)


def is_fk_check(statement: str) -> bool:
    return bool(_FK_CHECK.match(statement.strip()))


def strip_literals(sql: str) -> str:
    """The statement with strings, quoted identifiers' contents and comments blanked out."""
    out, i, n = [], 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "'":
            j = i + 1
            while j < n:
                if sql[j] == "'" and j + 1 < n and sql[j + 1] == "'":
                    j += 2
                    continue
                if sql[j] == "'":
                    break
                j += 1
            out.append("''")
            i = j + 1
        elif c == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end == -1 else end + 1
        elif c == "/" and sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end == -1 else end + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


_WRITE = re.compile(r'\b(?:INSERT\s+INTO|DELETE\s+FROM|(?<!DO )UPDATE\s+"?[A-Za-z_][\w.]*"?\s+SET)\b',
                    re.IGNORECASE)


def write_operations(statement: str) -> int:
    """INSERT / UPDATE / DELETE operations in a statement, those inside WITH (…) included
    (an upsert's ON CONFLICT DO UPDATE is part of its INSERT)."""
    return len(_WRITE.findall(strip_literals(statement)))
