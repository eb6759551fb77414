"""A Python checker for the judge tests (imported by its module path, `checkers:any_divisor`)."""


def any_divisor(input: str, expected: str, actual: str) -> bool:
    """Accepts any proper divisor d of n with 1 < d < n (the expected answer is only one of them)."""
    n = int(input.split()[0])
    try:
        d = int(actual.split()[0])
    except (ValueError, IndexError):
        return False
    return 1 < d < n and n % d == 0
