"""Counting rows for a page without counting a million of them.

A list page shows how many rows its filter matches. An exact `COUNT(*)` reads every matching row
(or index entry): tens of milliseconds per 100,000, on every page load. `count(queryset)` counts
exactly up to `EXACT_UP_TO` rows (a bounded count, `SELECT count(*) FROM (… LIMIT n + 1)`), and
past that, on PostgreSQL, answers the planner's estimate (`EXPLAIN`, from the table's statistics:
`ANALYZE` / autovacuum keep them) — an estimate is what a page of a million needs ("about
1,000,000"), and small results, which people read closely, stay exact. Other databases count
exactly.

`EstimatingPaginator` is Django's `Paginator` with that count (`count_is_estimate` says which it
is), and page numbers past an estimate answer an empty page instead of an error.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.paginator import EmptyPage, PageNotAnInteger, Paginator
from django.db import connections
from django.db.models import QuerySet
from django.utils.functional import cached_property

EXACT_UP_TO = 10_000


def count(queryset: QuerySet, exact_up_to: int | None = None) -> tuple[int, bool]:
    """(rows the queryset matches, whether that is an estimate)."""
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return queryset.count(), False
    exact_up_to = EXACT_UP_TO if exact_up_to is None else exact_up_to
    bounded = queryset.order_by().values("pk")[: exact_up_to + 1].count()
    if bounded <= exact_up_to:
        return bounded, False
    return max(planned_rows(queryset), exact_up_to + 1), True


def planned_rows(queryset: QuerySet) -> int:
    """The planner's estimate of the rows a queryset returns (PostgreSQL)."""
    sql, params = queryset.order_by().values("pk").query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


class EstimatingPaginator(Paginator):
    """A paginator whose count is `count()`'s: exact up to `EXACT_UP_TO`, an estimate past it."""

    count_is_estimate = False

    @cached_property
    def count(self) -> int:
        if not isinstance(self.object_list, QuerySet):
            return len(self.object_list)
        total, self.count_is_estimate = count(self.object_list)
        return total

    def validate_number(self, number: Any) -> int:
        if not self.count or not self.count_is_estimate:  # counting first says which it is
            return super().validate_number(number)
        try:  # past an estimate there may be rows: any page from 1 up may be asked for
            value = int(number)
        except (TypeError, ValueError):
            raise PageNotAnInteger(self.error_messages["invalid_page"]) from None
        if value < 1:
            raise EmptyPage(self.error_messages["min_page"])
        return value

    def page(self, number: Any) -> Any:
        if not self.count or not self.count_is_estimate:  # Django's own page, validation and all
            return super().page(number)
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        return self._get_page(  # type: ignore[attr-defined]  # Django's Paginator hook, missing from django-stubs
            self.object_list[bottom:bottom + self.per_page], number, self)
