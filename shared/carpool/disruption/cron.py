"""A small cron matcher for NodePool budget `schedule`s (UTC), the 5-field subset Karpenter accepts.

Karpenter parses schedules with robfig/cron's standard parser (`TZ=UTC` prefixed); this follows the same
rules so a window opens at the same minutes:
- fields: minute (0-59), hour (0-23), day of month (1-31), month (1-12 or jan-dec), day of week
  (0-6 or sun-sat; 7 is rejected, as robfig/cron does);
- items: `*`, `?` (as `*`), `n`, `a-b`, `*/s`, `a-b/s`, `a/s` (from `a` to the field's maximum), lists
  with `,`;
- macros: `@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`, `@hourly`;
- day of month and day of week: when both are restricted a day matches if *either* does (Vixie cron);
  when one is `*`/`?` both must match.
A schedule robfig rejects raises `CronError`; budgets then fail closed (no disruption), as Karpenter does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep",
                                            "oct", "nov", "dec"))}
_DAYS = {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}


class CronError(ValueError):
    """A schedule Karpenter's parser would reject."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int]


_FIELDS = (
    _Field("minute", 0, 59, {}),
    _Field("hour", 0, 23, {}),
    _Field("day of month", 1, 31, {}),
    _Field("month", 1, 12, _MONTHS),
    _Field("day of week", 0, 6, _DAYS),
)


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """The parsed schedule: the allowed values of each field, plus whether the day fields were `*`."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, text: str) -> CronSchedule:
        spec = MACROS.get(text.strip().lower(), text)
        parts = spec.split()
        if len(parts) != 5:
            raise CronError(f"schedule {text!r}: expected 5 fields (minute hour day month weekday) or a macro")
        parsed = [_parse_field(p, f, text) for p, f in zip(parts, _FIELDS, strict=True)]
        weekdays = frozenset(parsed[4][0])
        return cls(text, tuple(sorted(parsed[0][0])), tuple(sorted(parsed[1][0])), frozenset(parsed[2][0]),
                   frozenset(parsed[3][0]), weekdays, parsed[2][1], parsed[4][1])

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow

    def matches(self, when: datetime) -> bool:
        when = when.astimezone(UTC)
        return when.minute in self.minutes and when.hour in self.hours and self.matches_day(when.date())

    def latest_fire(self, now: datetime, after: datetime) -> datetime | None:
        """The last minute the schedule fired at, at or before `now` and strictly after `after` (UTC).

        Walks back day by day from `now`, so a window of any length costs at most one check per day.
        """
        now = now.astimezone(UTC).replace(second=0, microsecond=0)
        after = after.astimezone(UTC)
        day = now.date()
        while datetime.combine(day + timedelta(days=1), datetime.min.time(), UTC) > after:
            if self.matches_day(day):
                fire = self._latest_in_day(day, now)
                if fire is not None:
                    return fire if fire > after else None
            day -= timedelta(days=1)
        return None

    def _latest_in_day(self, day: date, now: datetime) -> datetime | None:
        start = datetime.combine(day, datetime.min.time(), UTC)
        for hour in reversed(self.hours):
            for minute in reversed(self.minutes):
                fire = start.replace(hour=hour, minute=minute)
                if fire <= now:
                    return fire
        return None


def active(schedule: str, duration: timedelta, now: datetime) -> bool:
    """Whether a window that opens at each fire of `schedule` and lasts `duration` is open at `now`.

    Same rule as Karpenter's `Budget.IsActive`: open when the schedule fired in (now - duration, now].
    """
    return CronSchedule.parse(schedule).latest_fire(now, now - duration) is not None


def _parse_field(text: str, f: _Field, whole: str) -> tuple[set[int], bool]:
    """The values of one field and whether it was a bare wildcard (robfig's "star bit")."""
    values: set[int] = set()
    star = False
    for item in text.split(","):
        got, is_star = _parse_item(item, f, whole)
        values |= got
        star = star or is_star
    return values, star


def _parse_item(item: str, f: _Field, whole: str) -> tuple[set[int], bool]:
    range_part, slash, step_part = item.partition("/")
    step = _number(step_part, f, whole, {}) if slash else 1
    if slash and step <= 0:
        raise CronError(f"schedule {whole!r}: step {step_part!r} in the {f.name} field must be positive")
    star = False
    if range_part in ("*", "?"):
        low, high, star = f.low, f.high, step == 1
    elif "-" in range_part:
        a, _, b = range_part.partition("-")
        low, high = _number(a, f, whole, f.names), _number(b, f, whole, f.names)
    else:
        low = _number(range_part, f, whole, f.names)
        high = f.high if slash else low
    if not (f.low <= low <= high <= f.high):
        raise CronError(f"schedule {whole!r}: {item!r} is outside {f.low}-{f.high} for the {f.name} field")
    return set(range(low, high + 1, step)), star


def _number(text: str, f: _Field, whole: str, names: dict[str, int]) -> int:
    key = text.strip().lower()
    if key in names:
        return names[key]
    if not key.isdigit():
        raise CronError(f"schedule {whole!r}: {text!r} is not a number or name in the {f.name} field")
    return int(key)
