"""The middle level: starter problems between the ladder (specs/ladder.py) and the original set.

Level 5. The ladder's level 4 is one loop or one condition around a builtin; the original problems
include ideas a ~100M-parameter model rarely finds. Each problem here needs one small idea of its own
and 3-8 lines of plain Python: a loop over a range (a sum or product with a condition, a while loop up
to a bound, a printed pattern), a list (read n, then n integers: running totals, neighbours, positions,
pairs), a string (letters compared, counted, regrouped; the words of a line) or simple maths (digits,
bases, a sequence, a short simulation). Ten of each theme. No two reference solutions are a few tokens
apart, here or against the other spec files: a model that solves one has not thereby solved another.
Wrong solutions are the mistakes a small model makes: off by one, the edge case forgotten (a list of one,
a tie, nothing found), a 32-bit overflow, an output format not asked for, a builtin that almost fits.
"""

from __future__ import annotations

import random

from common import Spec, Wrong, array_input, line, rand_ints, src, word

SPECS: list[Spec] = []
add = SPECS.append

M = 10**9
N_MAX = 1000
LEVEL = 5
LOWER = "abcdefghijklmnopqrstuvwxyz"
ONE_INT = "A single line with one integer n."
ONE_WORD = "A single line with one word made of lowercase English letters."
TWO_WORDS = "Two lines, each with one word of lowercase English letters: s on the first, t on the second."
LIST_INPUT = "The first line contains an integer n. The second line contains n integers a_1, ..., a_n."
WORDS_LINE = "A single line of words made of lowercase English letters, separated by one or more spaces."


def _ints(rng: random.Random, fixed: list[int], lo: int, hi: int, k: int = 3, avoid: tuple = ()) -> list[str]:
    """One integer per test: the fixed edge cases, then k random ones in [lo, hi] that are not in avoid
    (the public examples)."""
    xs = list(fixed)
    while len(xs) < len(fixed) + k:
        x = rng.randint(lo, hi)
        if x not in avoid:
            xs.append(x)
    return [line(x) for x in xs]


def _lists(rng: random.Random, lo: int = -M, hi: int = M, n_max: int = N_MAX) -> list[list[int]]:
    """Edge cases shared by the list problems: one element, all equal, all negative, extremes, big."""
    return [
        [0],
        [-5],
        [7, 7, 7],
        [-3, -1, -2],
        [M, -M],
        [1, 0, -1, 0],
        rand_ints(rng, 10, -20, 20),
        rand_ints(rng, 100, lo, hi),
        rand_ints(rng, n_max, lo, hi),
        rand_ints(rng, n_max, -3, 3),
    ]


def _runs(rng: random.Random, n: int, values: list[int], max_run: int) -> list[int]:
    """n numbers in blocks of equal values, each block 1..max_run long."""
    out: list[int] = []
    while len(out) < n:
        out += [rng.choice(values)] * rng.randint(1, max_run)
    return out[:n]


def _words_line(rng: random.Random, n_words: int, max_gap: int = 1, max_len: int = 8) -> str:
    out = []
    for i in range(n_words):
        if i:
            out.append(" " * rng.randint(1, max_gap))
        out.append(word(rng, rng.randint(1, max_len)))
    return "".join(out) + "\n"


def _pair(s: str, t: str) -> str:
    return f"{s}\n{t}\n"


# ================================================================ loops over a range


# ---------------------------------------------------------------- sum-multiples-3-or-5
def _gen_sum_3_5(rng: random.Random) -> list[str]:
    return _ints(rng, [1, 3, 4, 5, 6, 14, 15, 16, 30, 100, 99_999, 100_000], 1, 10**5, avoid=(10, 2))


add(Spec(
    name="sum-multiples-3-or-5",
    title="Multiples of Three or Five",
    legend="You are given an integer n. Print the sum of all integers from 1 to n (inclusive) that are "
    "divisible by 3 or by 5. A number divisible by both, such as 15, is added once.",
    input_spec=ONE_INT,
    output_spec="Print one integer: the sum.",
    constraints=["1 <= n <= 10^5", "The sum can exceed 32-bit integers."],
    cpp=src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            long long total = 0;
            for (int i = 1; i <= n; i++)
                if (i % 3 == 0 || i % 5 == 0) total += i;
            std::cout << total << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        total = 0
        for i in range(1, n + 1):
            if i % 3 == 0 or i % 5 == 0:
                total += i
        print(total)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            total = 0
            for i in range(1, n):
                if i % 3 == 0 or i % 5 == 0:
                    total += i
            print(total)
        """), "range(1, n) stops at n - 1, so n itself is never added"),
        Wrong("python", src("""
            n = int(input())
            print(sum(range(3, n + 1, 3)) + sum(range(5, n + 1, 5)))
        """), "adds the multiples of 15 twice"),
        Wrong("cpp", src("""
            #include <iostream>
            int main() {
                int n, total = 0;
                std::cin >> n;
                for (int i = 1; i <= n; i++)
                    if (i % 3 == 0 || i % 5 == 0) total += i;
                std::cout << total << "\\n";
            }
        """), "32-bit int total overflows for large n"),
    ],
    public=["10\n", "2\n"],
    gen=_gen_sum_3_5,
    notes=["3 + 5 + 6 + 9 + 10 = 33.", "No number from 1 to 2 is divisible by 3 or 5."],
    level=LEVEL,
))


# ---------------------------------------------------------------- lcm-one-to-n
def _gen_lcm_range(rng: random.Random) -> list[str]:
    return _ints(rng, [2, 3, 4, 5, 6, 16, 17, 22, 23, 30, 41, 42], 1, 42, avoid=(10, 1))


add(Spec(
    name="lcm-one-to-n",
    title="Divisible by All",
    legend="You are given an integer n. Find the smallest positive number that is divisible by every "
    "integer from 1 to n. Hint: go through i = 1, 2, ..., n and keep the least common multiple of the "
    "numbers so far; lcm(x, i) = x / gcd(x, i) * i, where gcd is the greatest common divisor.",
    input_spec=ONE_INT,
    output_spec="Print one integer: the smallest number divisible by 1, 2, ..., n.",
    constraints=["1 <= n <= 42", "The answer fits in a signed 64-bit integer, but not always in 32 bits."],
    cpp=src("""
        #include <iostream>
        #include <numeric>
        int main() {
            int n;
            std::cin >> n;
            long long m = 1;
            for (long long i = 1; i <= n; i++) m = m / std::gcd(m, i) * i;
            std::cout << m << "\\n";
        }
    """),
    python=src("""
        import math
        n = int(input())
        m = 1
        for i in range(1, n + 1):
            m = m // math.gcd(m, i) * i
        print(m)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            m = 1
            for i in range(1, n + 1):
                m = m * i
            print(m)
        """), "multiplies all the numbers: n! is divisible by each of them but is not the smallest"),
        Wrong("python", src("""
            import math
            n = int(input())
            m = 1
            for i in range(1, n):
                m = m // math.gcd(m, i) * i
            print(m)
        """), "range(1, n) leaves out n itself"),
        Wrong("cpp", src("""
            #include <iostream>
            #include <numeric>
            int main() {
                int n, m = 1;
                std::cin >> n;
                for (int i = 1; i <= n; i++) m = m / std::gcd(m, i) * i;
                std::cout << m << "\\n";
            }
        """), "32-bit int overflows from n = 23"),
    ],
    public=["10\n", "1\n"],
    gen=_gen_lcm_range,
    notes=["2520 = 2^3 * 3^2 * 5 * 7 is divisible by every number from 1 to 10."],
    level=LEVEL,
))


# ---------------------------------------------------------------- alternating-squares
def _gen_alt_squares(rng: random.Random) -> list[str]:
    return _ints(rng, [1, 2, 5, 10, 11, 50_000, 99_999, 100_000], 1, 10**5, avoid=(3, 4))


add(Spec(
    name="alternating-squares",
    title="Plus, Minus, Squares",
    legend="You are given an integer n. Compute 1^2 - 2^2 + 3^2 - 4^2 + ... : the squares of the numbers "
    "from 1 to n, where the square of an odd number is added and the square of an even number is "
    "subtracted.",
    input_spec=ONE_INT,
    output_spec="Print one integer: the value of the expression (it can be negative).",
    constraints=["1 <= n <= 10^5", "The answer can exceed 32-bit integers."],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n, total = 0, sign = 1;
            std::cin >> n;
            for (long long i = 1; i <= n; i++) {
                total += sign * i * i;
                sign = -sign;
            }
            std::cout << total << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        total = 0
        sign = 1
        for i in range(1, n + 1):
            total += sign * i * i
            sign = -sign
        print(total)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            total = 0
            sign = -1
            for i in range(1, n + 1):
                total += sign * i * i
                sign = -sign
            print(total)
        """), "starts with a minus: subtracts the odd squares and adds the even ones"),
        Wrong("python", src("""
            n = int(input())
            total = 0
            sign = 1
            for i in range(1, n):
                total += sign * i * i
                sign = -sign
            print(total)
        """), "range(1, n) leaves out the last square"),
        Wrong("cpp", src("""
            #include <iostream>
            int main() {
                int n, total = 0, sign = 1;
                std::cin >> n;
                for (int i = 1; i <= n; i++) {
                    total += sign * i * i;
                    sign = -sign;
                }
                std::cout << total << "\\n";
            }
        """), "32-bit int overflows: i * i alone passes 2^31 for i above 46340"),
    ],
    public=["3\n", "4\n"],
    gen=_gen_alt_squares,
    notes=["1 - 4 + 9 = 6.", "1 - 4 + 9 - 16 = -10."],
    level=LEVEL,
))


# ---------------------------------------------------------------- powers-of-two-up-to
def _gen_powers_upto(rng: random.Random) -> list[str]:
    fixed = [2, 3, 4, 7, 8, 1023, 1024, 10**9, 2**59, 2**59 - 1, 10**18, 10**18 - 1]
    return _ints(rng, fixed, 1, 10**18, avoid=(10, 1))


add(Spec(
    name="powers-of-two-up-to",
    title="Powers of Two",
    legend="You are given an integer n. Print every power of two that is not greater than n, smallest "
    "first: 1, 2, 4, 8, 16, ... (1 = 2^0 is a power of two).",
    input_spec=ONE_INT,
    output_spec="Print the powers of two that are at most n, in increasing order, one per line.",
    constraints=["1 <= n <= 10^18"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            for (long long p = 1; p <= n; p *= 2) std::cout << p << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        p = 1
        while p <= n:
            print(p)
            p *= 2
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            p = 1
            while p < n:
                print(p)
                p *= 2
        """), "p < n leaves out n when n is itself a power of two"),
        Wrong("python", src("""
            n = int(input())
            p = 2
            while p <= n:
                print(p)
                p *= 2
        """), "starts at 2 and forgets 1 = 2^0"),
    ],
    public=["10\n", "1\n"],
    gen=_gen_powers_upto,
    level=LEVEL,
))


# ---------------------------------------------------------------- count-sevens-in-range
def _gen_sevens(rng: random.Random) -> list[str]:
    pairs = [(1, 1), (7, 7), (8, 8), (1, 100), (77, 77), (1, 100_000), (M - 10**5, M),
             (700_000_000, 700_100_000), (999_999_900, M), (170, 180)]
    for _ in range(3):
        a = rng.randint(1, M - 10**5)
        pairs.append((a, a + rng.randint(0, 10**5)))
    return [line(a, b) for a, b in pairs]


add(Spec(
    name="count-sevens-in-range",
    title="Lucky Sevens",
    legend="You are given two integers a and b. Count the integers x with a <= x <= b whose decimal "
    "notation contains the digit 7 at least once (7, 17, 70 and 177 do; 16 and 80 do not).",
    input_spec="A single line with two integers a and b separated by a space.",
    output_spec="Print one integer: how many numbers from a to b contain the digit 7.",
    constraints=["1 <= a <= b <= 10^9", "b - a <= 10^5"],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            int count = 0;
            for (long long x = a; x <= b; x++)
                if (std::to_string(x).find('7') != std::string::npos) count++;
            std::cout << count << "\\n";
        }
    """),
    python=src("""
        a, b = map(int, input().split())
        print(sum(1 for x in range(a, b + 1) if "7" in str(x)))
    """),
    wrong=[
        Wrong("python", src("""
            a, b = map(int, input().split())
            print(sum(1 for x in range(a, b + 1) if x % 10 == 7))
        """), "looks only at the last digit"),
        Wrong("python", src("""
            a, b = map(int, input().split())
            print(sum(str(x).count("7") for x in range(a, b + 1)))
        """), "counts the sevens, so 77 is counted twice"),
        Wrong("python", src("""
            a, b = map(int, input().split())
            print(sum(1 for x in range(a, b) if "7" in str(x)))
        """), "range(a, b) leaves out b"),
    ],
    public=["1 20\n", "70 80\n"],
    gen=_gen_sevens,
    notes=["7 and 17.", "Every number from 70 to 79; 80 has no 7."],
    level=LEVEL,
))


# ---------------------------------------------------------------- number-triangle
def _gen_number_triangle(rng: random.Random) -> list[str]:
    return _ints(rng, [2, 4, 5, 10, 59, 60], 1, 60, k=4, avoid=(3, 1))


add(Spec(
    name="number-triangle",
    title="Number Triangle",
    legend="You are given an integer n. Print n rows: row i (for i from 1 to n) contains the numbers 1, 2, "
    "..., i separated by spaces.",
    input_spec=ONE_INT,
    output_spec="Print n lines; the i-th line holds the numbers from 1 to i.",
    constraints=["1 <= n <= 60"],
    cpp=src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            for (int i = 1; i <= n; i++) {
                for (int j = 1; j <= i; j++) std::cout << j << (j < i ? ' ' : '\\n');
            }
        }
    """),
    python=src("""
        n = int(input())
        for i in range(1, n + 1):
            print(*range(1, i + 1))
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            for i in range(1, n + 1):
                print(*range(i))
        """), "range(i) counts from 0 to i - 1"),
        Wrong("python", src("""
            n = int(input())
            for i in range(1, n):
                print(*range(1, i + 1))
        """), "range(1, n) leaves out the last row"),
        Wrong("python", src("""
            n = int(input())
            for i in range(1, n + 1):
                print(*[i] * i)
        """), "prints i copies of i instead of 1 to i"),
    ],
    public=["3\n", "1\n"],
    gen=_gen_number_triangle,
    level=LEVEL,
))


# ---------------------------------------------------------------- chessboard
def _gen_chessboard(rng: random.Random) -> list[str]:
    return _ints(rng, [1, 2, 5, 6, 10, 49, 50], 1, 50, k=4, avoid=(3, 4))


add(Spec(
    name="chessboard",
    title="Chessboard",
    legend="You are given an integer n. Draw an n by n board: the cell in row i and column j (both counted "
    "from 1) is # when i + j is even and . (a dot) when i + j is odd. So the top-left cell is #, and the "
    "symbols alternate along every row and every column.",
    input_spec=ONE_INT,
    output_spec="Print n lines of n characters each, with no spaces.",
    constraints=["1 <= n <= 50"],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            int n;
            std::cin >> n;
            for (int i = 0; i < n; i++) {
                std::string row;
                for (int j = 0; j < n; j++) row += (i + j) % 2 == 0 ? '#' : '.';
                std::cout << row << "\\n";
            }
        }
    """),
    python=src("""
        n = int(input())
        for i in range(n):
            print("".join("#" if (i + j) % 2 == 0 else "." for j in range(n)))
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            row = ("#." * n)[:n]
            for i in range(n):
                print(row)
        """), "prints the same row every time: the rows do not alternate"),
        Wrong("python", src("""
            n = int(input())
            for i in range(n):
                print(" ".join("#" if (i + j) % 2 == 0 else "." for j in range(n)))
        """), "puts spaces between the cells"),
        Wrong("python", src("""
            n = int(input())
            for i in range(n):
                print("".join("#" if (i + j) % 2 == 1 else "." for j in range(n)))
        """), "starts the board with a dot"),
    ],
    public=["3\n", "4\n"],
    gen=_gen_chessboard,
    level=LEVEL,
))


# ---------------------------------------------------------------- squares-reach-n
def _squares_sum(k: int) -> int:
    return k * (k + 1) * (2 * k + 1) // 6


def _gen_squares_reach(rng: random.Random) -> list[str]:
    fixed = [1, 2, 5, 6, 13, 30, 31, 10**15, _squares_sum(14_000), _squares_sum(14_000) + 1,
             _squares_sum(100) - 1]
    return _ints(rng, fixed, 1, 10**15, avoid=(15, 14))


add(Spec(
    name="squares-reach-n",
    title="Stacking Squares",
    legend="You are given an integer n. Add up the squares 1^2 + 2^2 + 3^2 + ... one at a time and stop "
    "as soon as the total is at least n. Print how many squares were added: the smallest k with "
    "1^2 + 2^2 + ... + k^2 >= n.",
    input_spec=ONE_INT,
    output_spec="Print one integer k.",
    constraints=["1 <= n <= 10^15"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n, total = 0, k = 0;
            std::cin >> n;
            while (total < n) {
                k++;
                total += k * k;
            }
            std::cout << k << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        k = 0
        total = 0
        while total < n:
            k += 1
            total += k * k
        print(k)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            k = 0
            total = 0
            while total <= n:
                k += 1
                total += k * k
            print(k)
        """), "total <= n goes one square too far when the sum hits n exactly"),
        Wrong("python", src("""
            n = int(input())
            k = 1
            total = 0
            while total < n:
                total += k * k
                k += 1
            print(k)
        """), "increments k after adding, so it prints one more than the count"),
        Wrong("python", src("""
            n = int(input())
            k = 0
            total = 0
            while total < n:
                k += 1
                total += k * k
            print(total)
        """), "prints the total instead of how many squares were added"),
    ],
    public=["15\n", "14\n"],
    gen=_gen_squares_reach,
    notes=["1 + 4 + 9 = 14 is still below 15; adding 16 gives 30.", "1 + 4 + 9 = 14 reaches 14 exactly."],
    level=LEVEL,
))


# ---------------------------------------------------------------- lcg-sequence
def _gen_lcg(rng: random.Random) -> list[str]:
    ts = [(0, 0, 0, 1, 10), (0, 0, 0, 7, 100_000), (3, 0, 9, 10, 5), (1, 1, 1, M, 100_000),
          (M - 1, M - 1, M - 1, M, 100_000), (2, 2, 0, M, 1), (6, 5, 4, 7, 0), (123, 456, 789, 1000, 99_999)]
    for _ in range(4):
        m = rng.randint(2, M)
        ts.append((rng.randrange(m), rng.randrange(m), rng.randrange(m), m, rng.randint(1, 10**5)))
    return [line(*t) for t in ts]


add(Spec(
    name="lcg-sequence",
    title="Pseudo-Random Numbers",
    legend="A sequence of numbers starts with x_0 = s, and each next number is made from the one before: "
    "x_(i+1) = (a * x_i + b) mod m, where mod is the remainder of the division by m. Print x_n.",
    input_spec="A single line with five integers s, a, b, m and n.",
    output_spec="Print one integer: x_n.",
    constraints=["1 <= m <= 10^9", "0 <= s, a, b < m", "0 <= n <= 10^5"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long x, a, b, m, n;
            std::cin >> x >> a >> b >> m >> n;
            for (long long i = 0; i < n; i++) x = (a * x + b) % m;
            std::cout << x << "\\n";
        }
    """),
    python=src("""
        x, a, b, m, n = map(int, input().split())
        for _ in range(n):
            x = (a * x + b) % m
        print(x)
    """),
    wrong=[
        Wrong("python", src("""
            x, a, b, m, n = map(int, input().split())
            for _ in range(n - 1):
                x = (a * x + b) % m
            print(x)
        """), "takes one step too few"),
        Wrong("python", src("""
            x, a, b, m, n = map(int, input().split())
            for _ in range(n):
                x = a * x % m + b
            print(x)
        """), "adds b after taking the remainder, so x can reach m or more"),
        Wrong("cpp", src("""
            #include <iostream>
            int main() {
                int x, a, b, m, n;
                std::cin >> x >> a >> b >> m >> n;
                for (int i = 0; i < n; i++) x = (a * x + b) % m;
                std::cout << x << "\\n";
            }
        """), "a * x overflows 32-bit int"),
    ],
    public=["1 2 3 100 3\n", "5 7 0 10 0\n"],
    gen=_gen_lcg,
    notes=["x_1 = 5, x_2 = 13, x_3 = 29.", "n = 0: the answer is s itself."],
    level=LEVEL,
))


# ---------------------------------------------------------------- growing-steps
def _gen_growing(rng: random.Random) -> list[str]:
    return _ints(rng, [2, 3, 10, 100, 999, 1000], 1, 1000, k=4, avoid=(6, 1))


add(Spec(
    name="growing-steps",
    title="Growing Steps",
    legend="A sequence starts at 1. The first step adds 1, the second step adds 2, the third adds 3, and "
    "so on: 1, 2, 4, 7, 11, 16, ... You are given n; print the first n numbers of the sequence.",
    input_spec=ONE_INT,
    output_spec="Print the first n numbers of the sequence, separated by spaces.",
    constraints=["1 <= n <= 1000"],
    cpp=src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            long long x = 1;
            for (int k = 1; k <= n; k++) {
                std::cout << x << (k < n ? ' ' : '\\n');
                x += k;
            }
        }
    """),
    python=src("""
        n = int(input())
        x = 1
        for k in range(1, n + 1):
            print(x, end=" ")
            x += k
        print()
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            x = 1
            for k in range(1, n + 1):
                x += k
                print(x, end=" ")
            print()
        """), "adds before printing, so the sequence starts at 2"),
        Wrong("python", src("""
            n = int(input())
            x = 1
            for k in range(n):
                print(x, end=" ")
                x += k
            print()
        """), "range(n) starts k at 0, so the first step adds nothing"),
        Wrong("python", src("""
            n = int(input())
            print(*range(1, n + 1))
        """), "adds 1 every time instead of a growing step"),
    ],
    public=["6\n", "1\n"],
    gen=_gen_growing,
    level=LEVEL,
))


# ================================================================ lists


# ---------------------------------------------------------------- count-above-average
def _gen_above_avg(rng: random.Random) -> list[str]:
    ls = _lists(rng) + [[-1, -2], [-5, -6, -6], [-4, -3, -3, -3], [2, 1, 1], [M] * N_MAX,
                        [-M] * (N_MAX - 1) + [M], rand_ints(rng, 7, -10, -1)]
    return [array_input(x) for x in ls]


add(Spec(
    name="count-above-average",
    title="Above Average",
    legend="You are given n integers. Their average is their sum divided by n, exactly (not rounded). "
    "Count how many of the numbers are strictly greater than the average.",
    input_spec=LIST_INPUT,
    output_spec="Print one integer: how many a_i are greater than the average.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <iostream>
        #include <vector>
        int main() {
            long long n, total = 0;
            std::cin >> n;
            std::vector<long long> a(n);
            for (auto& x : a) { std::cin >> x; total += x; }
            int count = 0;
            for (long long x : a)
                if (x * n > total) count++;
            std::cout << count << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        a = list(map(int, input().split()))
        total = sum(a)
        print(sum(1 for x in a if x * n > total))
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            avg = int(sum(a) / n)
            print(sum(1 for x in a if x > avg))
        """), "int() rounds a negative average up (towards zero), so -1.5 becomes -1"),
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            total = sum(a)
            print(sum(1 for x in a if x * n >= total))
        """), "also counts the numbers equal to the average"),
        Wrong("cpp", src("""
            #include <iostream>
            #include <vector>
            int main() {
                int n, total = 0;
                std::cin >> n;
                std::vector<int> a(n);
                for (auto& x : a) { std::cin >> x; total += x; }
                int count = 0;
                for (int x : a)
                    if (x * n > total) count++;
                std::cout << count << "\\n";
            }
        """), "32-bit int: the sum and x * n overflow"),
    ],
    public=["5\n1 2 3 4 10\n", "4\n-1 -2 -2 -2\n"],
    gen=_gen_above_avg,
    notes=["The average is 20 / 5 = 4; only 10 is above it.", "The average is -7 / 4 = -1.75; -1 is above."],
    level=LEVEL,
))


# ---------------------------------------------------------------- prefix-sums
def _gen_prefix(rng: random.Random) -> list[str]:
    ls = _lists(rng) + [[M] * N_MAX, [5, -5, 5, -5]]
    return [array_input(x) for x in ls]


add(Spec(
    name="prefix-sums",
    title="Running Total",
    legend="You are given n integers. Print their running totals: the i-th number you print is "
    "a_1 + a_2 + ... + a_i, the sum of the first i numbers.",
    input_spec=LIST_INPUT,
    output_spec="Print n integers separated by spaces.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9", "The totals can exceed 32-bit integers."],
    cpp=src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            long long s = 0;
            for (int i = 0; i < n; i++) {
                long long x;
                std::cin >> x;
                s += x;
                std::cout << s << (i + 1 < n ? ' ' : '\\n');
            }
        }
    """),
    python=src("""
        n = int(input())
        a = list(map(int, input().split()))
        s = 0
        out = []
        for x in a:
            s += x
            out.append(s)
        print(*out)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            s = 0
            out = []
            for x in a:
                out.append(s)
                s += x
            print(*out)
        """), "appends before adding: prints 0 first and leaves out the whole sum"),
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            print(sum(a))
        """), "prints only the last total"),
        Wrong("cpp", src("""
            #include <iostream>
            int main() {
                int n, s = 0;
                std::cin >> n;
                for (int i = 0; i < n; i++) {
                    int x;
                    std::cin >> x;
                    s += x;
                    std::cout << s << " ";
                }
                std::cout << "\\n";
            }
        """), "32-bit int total overflows"),
    ],
    public=["4\n3 1 -2 5\n", "1\n9\n"],
    gen=_gen_prefix,
    notes=["3, 3 + 1 = 4, 4 - 2 = 2, 2 + 5 = 7."],
    level=LEVEL,
))


# ---------------------------------------------------------------- count-rises
def _gen_rises(rng: random.Random) -> list[str]:
    ls = _lists(rng) + [list(range(-N_MAX, 0)), list(range(N_MAX, 0, -1)), [9, 1, 2, 3], [1, 1, 2, 2]]
    return [array_input(x) for x in ls]


add(Spec(
    name="count-rises",
    title="Going Up",
    legend="You are given n integers in a row. A rise is a position where a number is strictly greater "
    "than the number just before it. Count the rises: the positions i from 2 to n with a_i > a_(i-1).",
    input_spec=LIST_INPUT,
    output_spec="Print one integer: the number of rises.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <iostream>
        #include <vector>
        int main() {
            int n;
            std::cin >> n;
            std::vector<long long> a(n);
            for (auto& x : a) std::cin >> x;
            int count = 0;
            for (int i = 1; i < n; i++)
                if (a[i] > a[i - 1]) count++;
            std::cout << count << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        a = list(map(int, input().split()))
        count = 0
        for i in range(1, n):
            if a[i] > a[i - 1]:
                count += 1
        print(count)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            count = 0
            for i in range(1, n):
                if a[i] >= a[i - 1]:
                    count += 1
            print(count)
        """), "counts equal neighbours as rises"),
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            count = 0
            for i in range(n):
                if a[i] > a[i - 1]:
                    count += 1
            print(count)
        """), "starts at i = 0, where a[i - 1] is the last number"),
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            print(sum(1 for x in a if x > a[0]))
        """), "compares every number with the first one instead of its neighbour"),
    ],
    public=["5\n1 3 2 4 4\n", "1\n7\n"],
    gen=_gen_rises,
    notes=["3 > 1 and 4 > 2: two rises; 4 after 4 is not a rise."],
    level=LEVEL,
))


# ---------------------------------------------------------------- longest-equal-run
def _gen_equal_run(rng: random.Random) -> list[str]:
    ls = _lists(rng) + [[7] * N_MAX, [1, 2, 2, 3, 3, 3], [4, 4, 1, 4, 4, 4, 1], [5, 6, 5, 6],
                        _runs(rng, 1000, [-1, 0, 1], 8), _runs(rng, N_MAX, [M, -M, 3], 30)]
    return [array_input(x) for x in ls]


add(Spec(
    name="longest-equal-run",
    title="Longest Block",
    legend="You are given n integers in a row. Find the length of the longest block of consecutive "
    "positions that all hold the same number.",
    input_spec=LIST_INPUT,
    output_spec="Print one integer: the length of the longest block of equal neighbours.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <iostream>
        #include <vector>
        int main() {
            int n;
            std::cin >> n;
            std::vector<long long> a(n);
            for (auto& x : a) std::cin >> x;
            int best = 1, cur = 1;
            for (int i = 1; i < n; i++) {
                cur = a[i] == a[i - 1] ? cur + 1 : 1;
                if (cur > best) best = cur;
            }
            std::cout << best << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        a = list(map(int, input().split()))
        best = cur = 1
        for i in range(1, n):
            cur = cur + 1 if a[i] == a[i - 1] else 1
            best = max(best, cur)
        print(best)
    """),
    wrong=[
        Wrong("python", src("""
            from collections import Counter
            n = int(input())
            a = list(map(int, input().split()))
            print(max(Counter(a).values()))
        """), "counts each value anywhere in the list, not in one block"),
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            best = 0
            cur = 1
            for i in range(1, n):
                if a[i] == a[i - 1]:
                    cur += 1
                else:
                    best = max(best, cur)
                    cur = 1
            print(best)
        """), "updates the best only when a block ends, so the last block is never counted"),
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            best = cur = 0
            for i in range(1, n):
                cur = cur + 1 if a[i] == a[i - 1] else 0
                best = max(best, cur)
            print(best)
        """), "counts the equal pairs in a block, one less than its length"),
    ],
    public=["7\n2 2 5 5 5 2 2\n", "3\n1 2 3\n"],
    gen=_gen_equal_run,
    level=LEVEL,
))


# ---------------------------------------------------------------- last-min-position
def _gen_last_min(rng: random.Random) -> list[str]:
    ls = _lists(rng) + [[3, 1, 2, 1], [-M, 5, -M], [1, 2, 3], [M, M - 1, M],
                        rand_ints(rng, N_MAX, -M, -M + 5)]
    return [array_input(x) for x in ls]


add(Spec(
    name="last-min-position",
    title="Where Is the Last Minimum?",
    legend="You are given n integers. Print the position of the smallest of them, counting positions from "
    "1. If the smallest value appears several times, print the position of its last appearance.",
    input_spec=LIST_INPUT,
    output_spec="Print one integer: the last position i where a_i is the minimum.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            int n, pos = 0;
            std::cin >> n;
            long long best = 0;
            for (int i = 1; i <= n; i++) {
                long long x;
                std::cin >> x;
                if (i == 1 || x <= best) { best = x; pos = i; }
            }
            std::cout << pos << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        a = list(map(int, input().split()))
        m = min(a)
        pos = 0
        for i in range(n):
            if a[i] == m:
                pos = i + 1
        print(pos)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            print(a.index(min(a)) + 1)
        """), "index() finds the first minimum, not the last"),
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            m = min(a)
            pos = 0
            for i in range(n):
                if a[i] == m:
                    pos = i
            print(pos)
        """), "prints the position counted from 0"),
    ],
    public=["6\n4 2 7 2 9 3\n", "1\n-8\n"],
    gen=_gen_last_min,
    notes=["The minimum 2 is at positions 2 and 4; the last is 4."],
    level=LEVEL,
))


# ---------------------------------------------------------------- rotate-right-k
def _gen_rotate(rng: random.Random) -> list[str]:
    cases = [([7], M), ([1, 2], 0), ([1, 2, 3], 3), ([1, 2, 3], 2), ([4, 5, 6, 7], 6),
             ([-1, -2, -3, -4, -5], 999_999_999), (rand_ints(rng, 10, -20, 20), 10),
             (rand_ints(rng, 100, -M, M), 57), (rand_ints(rng, N_MAX, -M, M), rng.randint(1, M)),
             (rand_ints(rng, N_MAX, -M, M), N_MAX + 1), (rand_ints(rng, 999, 0, 9), rng.randint(1, M))]
    return [line(len(a), k) + line(*a) for a, k in cases]


add(Spec(
    name="rotate-right-k",
    title="Rotate the Row",
    legend="You are given n integers in a row and a number k. Rotate the row k places to the right: in "
    "one step every number moves one place to the right and the last number moves to the front. Print "
    "the row after k steps.",
    input_spec="The first line contains two integers n and k. The second line contains n integers "
    "a_1, ..., a_n.",
    output_spec="Print the n numbers after the rotation, separated by spaces.",
    constraints=[f"1 <= n <= {N_MAX}", "0 <= k <= 10^9", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <iostream>
        #include <vector>
        int main() {
            long long n, k;
            std::cin >> n >> k;
            std::vector<long long> a(n);
            for (auto& x : a) std::cin >> x;
            k %= n;
            for (long long i = 0; i < n; i++) std::cout << a[(i - k + n) % n] << (i + 1 < n ? ' ' : '\\n');
        }
    """),
    python=src("""
        n, k = map(int, input().split())
        a = list(map(int, input().split()))
        k %= n
        print(*(a[n - k:] + a[:n - k]))
    """),
    wrong=[
        Wrong("python", src("""
            n, k = map(int, input().split())
            a = list(map(int, input().split()))
            print(*(a[-k:] + a[:-k]))
        """), "forgets k % n: for k >= n the slices keep the row unchanged"),
        Wrong("python", src("""
            n, k = map(int, input().split())
            a = list(map(int, input().split()))
            k %= n
            print(*(a[k:] + a[:k]))
        """), "rotates to the left"),
    ],
    public=["5 2\n1 2 3 4 5\n", "3 4\n7 8 9\n"],
    gen=_gen_rotate,
    notes=["", "Four steps on three numbers are one step: 9 moves to the front."],
    level=LEVEL,
))


# ---------------------------------------------------------------- odd-even-position-sums
def _gen_pos_sums(rng: random.Random) -> list[str]:
    ls = _lists(rng) + [[M] * N_MAX, [1, 2], [5, 0, 5, 0, 5]]
    return [array_input(x) for x in ls]


add(Spec(
    name="odd-even-position-sums",
    title="Odd and Even Places",
    legend="You are given n integers a_1, ..., a_n. Print two numbers: the sum of the numbers at odd "
    "positions (a_1 + a_3 + a_5 + ...) and the sum of the numbers at even positions (a_2 + a_4 + ...). "
    "Positions are counted from 1; a sum of no numbers is 0.",
    input_spec=LIST_INPUT,
    output_spec="Print two integers separated by a space: the odd-position sum, then the even-position sum.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9", "The sums can exceed 32-bit integers."],
    cpp=src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            long long odd = 0, even = 0;
            for (int i = 1; i <= n; i++) {
                long long x;
                std::cin >> x;
                if (i % 2 == 1) odd += x; else even += x;
            }
            std::cout << odd << " " << even << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        a = list(map(int, input().split()))
        print(sum(a[::2]), sum(a[1::2]))
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            odd = even = 0
            for i in range(n):
                if i % 2 == 1:
                    odd += a[i]
                else:
                    even += a[i]
            print(odd, even)
        """), "tests the 0-based index, so odd and even positions swap"),
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            print(sum(x for x in a if x % 2 == 1), sum(x for x in a if x % 2 == 0))
        """), "sums the odd and even numbers instead of the odd and even positions"),
    ],
    public=["5\n1 2 3 4 5\n", "1\n-6\n"],
    gen=_gen_pos_sums,
    notes=["1 + 3 + 5 = 9 and 2 + 4 = 6.", "There is no even position, so the second sum is 0."],
    level=LEVEL,
))


# ---------------------------------------------------------------- zero-sum-pairs
ZERO_PAIRS_N = 500


def _gen_zero_pairs(rng: random.Random) -> list[str]:
    ls = [[0], [5], [0, 0], [M, -M], [1, 1], [2, -2, 2, -2], [0] * ZERO_PAIRS_N,
          [rng.choice([M, -M]) for _ in range(ZERO_PAIRS_N)], rand_ints(rng, 20, -3, 3),
          rand_ints(rng, ZERO_PAIRS_N, -10, 10), rand_ints(rng, ZERO_PAIRS_N, -M, M),
          rand_ints(rng, ZERO_PAIRS_N, 1, 100)]
    return [array_input(x) for x in ls]


add(Spec(
    name="zero-sum-pairs",
    title="Pairs That Cancel",
    legend="You are given n integers. Count the pairs of positions i < j such that a_i + a_j = 0. Pairs "
    "are told apart by their positions, so equal numbers at different positions make different pairs.",
    input_spec=LIST_INPUT,
    output_spec="Print one integer: the number of pairs.",
    constraints=[f"1 <= n <= {ZERO_PAIRS_N}", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <iostream>
        #include <vector>
        int main() {
            int n;
            std::cin >> n;
            std::vector<long long> a(n);
            for (auto& x : a) std::cin >> x;
            long long count = 0;
            for (int i = 0; i < n; i++)
                for (int j = i + 1; j < n; j++)
                    if (a[i] + a[j] == 0) count++;
            std::cout << count << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        a = list(map(int, input().split()))
        count = 0
        for i in range(n):
            for j in range(i + 1, n):
                if a[i] + a[j] == 0:
                    count += 1
        print(count)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            count = 0
            for i in range(n):
                for j in range(n):
                    if i != j and a[i] + a[j] == 0:
                        count += 1
            print(count)
        """), "counts every pair twice, as (i, j) and (j, i)"),
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            count = 0
            for i in range(n):
                for j in range(i, n):
                    if a[i] + a[j] == 0:
                        count += 1
            print(count)
        """), "j starts at i, so a 0 makes a pair with itself"),
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            print(sum(1 for x in set(a) if x > 0 and -x in a))
        """), "counts distinct values with a partner, ignoring repeats and zeros"),
    ],
    public=["5\n1 -1 2 -1 0\n", "3\n0 0 0\n"],
    gen=_gen_zero_pairs,
    notes=["The 1 pairs with each of the two -1s.", "Any two of the three zeros: 3 pairs."],
    level=LEVEL,
))


# ---------------------------------------------------------------- second-largest
def _gen_second(rng: random.Random) -> list[str]:
    ls = _lists(rng) + [[M, M, M - 1], [-M, -M + 1], [3, 3, 1, 3], [M] * N_MAX,
                        [M] * (N_MAX - 1) + [-M], rand_ints(rng, N_MAX, M - 3, M)]
    return [array_input(x) for x in ls]


add(Spec(
    name="second-largest",
    title="Runner-Up",
    legend="You are given n integers. Print the largest number that is strictly smaller than the maximum. "
    "If all the numbers are equal, there is no such number: print NONE.",
    input_spec=LIST_INPUT,
    output_spec="Print one integer, or the word NONE.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <algorithm>
        #include <iostream>
        #include <vector>
        int main() {
            int n;
            std::cin >> n;
            std::vector<long long> a(n);
            for (auto& x : a) std::cin >> x;
            long long m = *std::max_element(a.begin(), a.end());
            bool found = false;
            long long second = 0;
            for (long long x : a)
                if (x < m && (!found || x > second)) { second = x; found = true; }
            if (found) std::cout << second << "\\n";
            else std::cout << "NONE\\n";
        }
    """),
    python=src("""
        n = int(input())
        a = list(map(int, input().split()))
        m = max(a)
        rest = [x for x in a if x < m]
        print(max(rest) if rest else "NONE")
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            a.sort()
            print(a[-2])
        """), "takes the second number after sorting, which is the maximum again when it repeats"),
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            m = max(a)
            print(max(x for x in a if x < m))
        """), "forgets the NONE case and crashes when all numbers are equal"),
    ],
    public=["5\n4 9 2 9 7\n", "2\n5 5\n"],
    gen=_gen_second,
    notes=["The maximum is 9; the largest number below it is 7."],
    level=LEVEL,
))


# ---------------------------------------------------------------- record-highs
def _gen_records(rng: random.Random) -> list[str]:
    ls = _lists(rng) + [list(range(-N_MAX, 0)), list(range(N_MAX, 0, -1)), [-M, -M, -M + 1],
                        sorted(rand_ints(rng, N_MAX, -M, M))]
    return [array_input(x) for x in ls]


add(Spec(
    name="record-highs",
    title="New Records",
    legend="You are given n integers in order. A number is a record if it is strictly greater than every "
    "number before it; the first number is always a record. Print all the records in order.",
    input_spec=LIST_INPUT,
    output_spec="Print the records, separated by spaces.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            long long best = 0;
            for (int i = 0; i < n; i++) {
                long long x;
                std::cin >> x;
                if (i == 0 || x > best) {
                    best = x;
                    std::cout << x << " ";
                }
            }
            std::cout << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        a = list(map(int, input().split()))
        records = [a[0]]
        for x in a[1:]:
            if x > records[-1]:
                records.append(x)
        print(*records)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            best = 0
            out = []
            for x in a:
                if x > best:
                    out.append(x)
                    best = x
            print(*out)
        """), "starts the best at 0, so negative records are missed"),
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            records = [a[0]]
            for x in a[1:]:
                if x >= records[-1]:
                    records.append(x)
            print(*records)
        """), "uses >=, so a number equal to the record counts again"),
        Wrong("python", src("""
            n = int(input())
            a = list(map(int, input().split()))
            records = [a[0]]
            for i in range(1, n):
                if a[i] > a[i - 1]:
                    records.append(a[i])
            print(*records)
        """), "compares with the previous number instead of the best so far"),
    ],
    public=["7\n3 1 4 4 2 5 9\n", "3\n-2 -7 -3\n"],
    gen=_gen_records,
    level=LEVEL,
))


# ================================================================ strings


# ---------------------------------------------------------------- longest-word
def _gen_longest_word(rng: random.Random) -> list[str]:
    fixed = ["a\n", "ab cd ef\n", "x yy zz\n", "aaa bb ccc\n", "hello  world   hi\n", "short tiny longest\n",
             "zebra apple\n", "bb a ccc dd\n"]
    fixed += [_words_line(rng, 700, 3), _words_line(rng, 30, 2, 4), _words_line(rng, 8, 1, 12)]
    return fixed


add(Spec(
    name="longest-word",
    title="Longest Word",
    legend="You are given a line of words. Print the longest word. If several words share the greatest "
    "length, print the one that comes first in the line.",
    input_spec=WORDS_LINE,
    output_spec="Print one word.",
    constraints=["The line has at most 5000 characters and at least one word."],
    cpp=src("""
        #include <iostream>
        #include <sstream>
        #include <string>
        int main() {
            std::string text, w, best;
            std::getline(std::cin, text);
            std::istringstream in(text);
            while (in >> w)
                if (w.size() > best.size()) best = w;
            std::cout << best << "\\n";
        }
    """),
    python=src("""
        words = input().split()
        best = words[0]
        for w in words:
            if len(w) > len(best):
                best = w
        print(best)
    """),
    wrong=[
        Wrong("python", src("""
            words = input().split()
            best = words[0]
            for w in words:
                if len(w) >= len(best):
                    best = w
            print(best)
        """), "uses >=, so a tie goes to the last word"),
        Wrong("python", src("""
            print(max(input().split()))
        """), "max of strings is the last word in alphabetical order, not the longest"),
        Wrong("python", src("""
            print(max(len(w) for w in input().split()))
        """), "prints the length instead of the word"),
    ],
    public=["the quick brown fox\n", "go to be\n"],
    gen=_gen_longest_word,
    notes=["quick and brown both have 5 letters; quick comes first."],
    level=LEVEL,
))


# ---------------------------------------------------------------- hamming-distance
def _gen_hamming(rng: random.Random) -> list[str]:
    out = [_pair("a", "a"), _pair("a", "b"), _pair("abc", "cba"), _pair("aaaa", "bbbb"), _pair("ab", "ba"),
           _pair("abcde", "abcde"), _pair("aab", "abb")]
    for n in (5000, 2000, 50, 7):
        s = word(rng, n, "abc")
        t = "".join(c if rng.random() < 0.6 else rng.choice("abc") for c in s)
        out.append(_pair(s, t))
    return out


add(Spec(
    name="hamming-distance",
    title="Letters Out of Place",
    legend="You are given two words s and t of the same length. Count the positions where they have "
    "different letters: the number of i with s_i != t_i.",
    input_spec=TWO_WORDS,
    output_spec="Print one integer: the number of positions where s and t differ.",
    constraints=["1 <= |s| = |t| <= 5000"],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s, t;
            std::cin >> s >> t;
            int count = 0;
            for (size_t i = 0; i < s.size(); i++)
                if (s[i] != t[i]) count++;
            std::cout << count << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        t = input().strip()
        print(sum(1 for x, y in zip(s, t) if x != y))
    """),
    wrong=[
        Wrong("python", src("""
            s = input().strip()
            t = input().strip()
            print(sum(1 for x, y in zip(s, t) if x == y))
        """), "counts the positions where the letters are the same"),
        Wrong("python", src("""
            s = input().strip()
            t = input().strip()
            print(sum(1 for c in s if c not in t))
        """), "counts letters of s missing from t anywhere, ignoring positions"),
    ],
    public=["karolin\nkathrin\n", "abc\nabc\n"],
    gen=_gen_hamming,
    notes=["They differ at positions 3, 4 and 5 (r/t, o/h, l/r)."],
    level=LEVEL,
))


# ---------------------------------------------------------------- run-length-encode
def _gen_rle(rng: random.Random) -> list[str]:
    ws = ["a", "aaaa", "abc", "aabbaa", "a" * 5000, "abbbbbbbbbbbbc", "zzzy"]
    ws += ["".join(rng.choice("ab") * rng.randint(1, 15) for _ in range(600))[:5000], word(rng, 20, "ab"),
           word(rng, 3000, "xyz"), word(rng, 12)]
    return [w + "\n" for w in ws]


add(Spec(
    name="run-length-encode",
    title="Squeeze the Word",
    legend="You are given a word. Split it into blocks of equal consecutive letters and write each block "
    "as its letter followed by the block's length. For example aaabcc becomes a3b1c2.",
    input_spec=ONE_WORD,
    output_spec="Print the encoded word.",
    constraints=["The word has between 1 and 5000 letters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            std::string out;
            size_t i = 0;
            while (i < s.size()) {
                size_t j = i;
                while (j < s.size() && s[j] == s[i]) j++;
                out += s[i] + std::to_string(j - i);
                i = j;
            }
            std::cout << out << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        out = ""
        i = 0
        while i < len(s):
            j = i
            while j < len(s) and s[j] == s[i]:
                j += 1
            out += s[i] + str(j - i)
            i = j
        print(out)
    """),
    wrong=[
        Wrong("python", src("""
            s = input().strip()
            out = ""
            count = 1
            for i in range(1, len(s)):
                if s[i] == s[i - 1]:
                    count += 1
                else:
                    out += s[i - 1] + str(count)
                    count = 1
            print(out)
        """), "never writes the last block"),
        Wrong("python", src("""
            s = input().strip()
            out = ""
            for c in sorted(set(s)):
                out += c + str(s.count(c))
            print(out)
        """), "counts each letter in the whole word instead of each block"),
        Wrong("python", src("""
            s = input().strip()
            out = ""
            i = 0
            while i < len(s):
                j = i
                while j < len(s) and s[j] == s[i]:
                    j += 1
                out += s[i] + (str(j - i) if j - i > 1 else "")
                i = j
            print(out)
        """), "leaves out the 1 after a single letter"),
    ],
    public=["aaabcc\n", "hello\n"],
    gen=_gen_rle,
    level=LEVEL,
))


# ---------------------------------------------------------------- acronym
def _gen_acronym(rng: random.Random) -> list[str]:
    fixed = ["a\n", "hello\n", "as soon  as possible\n", "x y z\n", "one   two\n"]
    fixed += [_words_line(rng, 1000, 3, 3), _words_line(rng, 10, 3), _words_line(rng, 50, 1),
              _words_line(rng, 4, 2, 10), _words_line(rng, 300, 1, 1), _words_line(rng, 7, 4)]
    return fixed


add(Spec(
    name="acronym",
    title="Acronym",
    legend="You are given a line of words. Make its acronym: the first letter of every word, in order, "
    "written as capital letters.",
    input_spec=WORDS_LINE,
    output_spec="Print the acronym in uppercase letters.",
    constraints=["The line has at most 5000 characters and at least one word."],
    cpp=src("""
        #include <cctype>
        #include <iostream>
        #include <sstream>
        #include <string>
        int main() {
            std::string text, w, out;
            std::getline(std::cin, text);
            std::istringstream in(text);
            while (in >> w) out += (char)std::toupper(w[0]);
            std::cout << out << "\\n";
        }
    """),
    python=src("""
        words = input().split()
        print("".join(w[0] for w in words).upper())
    """),
    wrong=[
        Wrong("python", src("""
            words = input().split(" ")
            print("".join(w[0] for w in words).upper())
        """), "split(' ') makes empty words between repeated spaces, and w[0] fails on them"),
        Wrong("python", src("""
            words = input().split()
            print("".join(w[-1] for w in words).upper())
        """), "takes the last letter of every word"),
    ],
    public=["portable network graphics\n", "read  the manual\n"],
    gen=_gen_acronym,
    level=LEVEL,
))


# ---------------------------------------------------------------- is-anagram
def _gen_anagram(rng: random.Random) -> list[str]:
    out = [_pair("a", "a"), _pair("a", "b"), _pair("ab", "ba"), _pair("abbc", "abcc"), _pair("abc", "abcd"),
           _pair("listen", "silent"), _pair("abc", "cba")]
    s = word(rng, 5000, "abcde")
    t = list(s)
    rng.shuffle(t)
    out.append(_pair(s, "".join(t)))
    t[0] = "f"
    out.append(_pair(s, "".join(t)))
    s2 = word(rng, 30, "ab")
    out.append(_pair(s2, "".join(sorted(s2))))
    out.append(_pair("aabb" * 1000, "ab" * 2000 + "a"))
    return out


add(Spec(
    name="is-anagram",
    title="Anagrams",
    legend="You are given two words s and t. They are anagrams if t can be made by rearranging the letters "
    "of s, using each letter exactly as many times as it appears in s (listen and silent are anagrams; "
    "aab and abb are not).",
    input_spec=TWO_WORDS,
    output_spec="Print YES if s and t are anagrams, otherwise print NO.",
    constraints=["1 <= |s|, |t| <= 5000"],
    cpp=src("""
        #include <algorithm>
        #include <iostream>
        #include <string>
        int main() {
            std::string s, t;
            std::cin >> s >> t;
            std::sort(s.begin(), s.end());
            std::sort(t.begin(), t.end());
            std::cout << (s == t ? "YES" : "NO") << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        t = input().strip()
        print("YES" if sorted(s) == sorted(t) else "NO")
    """),
    wrong=[
        Wrong("python", src("""
            s = input().strip()
            t = input().strip()
            print("YES" if set(s) == set(t) else "NO")
        """), "compares the sets of letters, ignoring how many times each appears"),
        Wrong("python", src("""
            s = input().strip()
            t = input().strip()
            print("YES" if s == t[::-1] else "NO")
        """), "checks only whether t is s reversed"),
    ],
    public=["night\nthing\n", "aab\nabb\n"],
    gen=_gen_anagram,
    level=LEVEL,
))


# ---------------------------------------------------------------- first-repeated-letter
def _gen_first_repeat(rng: random.Random) -> list[str]:
    ws = ["a", "aa", "abba", "abcabc", LOWER, "abcdefghijklmnopqrstuvwxyzz", "zyxwvutsrqponmlkjihgfedcbaz",
          "abcdb", word(rng, 5000), word(rng, 5000, "ab"), "qwerty" + "z" * 4994, word(rng, 8)]
    return [w + "\n" for w in ws]


add(Spec(
    name="first-repeated-letter",
    title="Seen It Before",
    legend="You are given a word. Read it from left to right and stop at the first letter that has "
    "already appeared earlier in the word. Print that letter. If no letter repeats, print NONE.",
    input_spec=ONE_WORD,
    output_spec="Print one letter, or the word NONE.",
    constraints=["The word has between 1 and 5000 letters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            bool seen[26] = {};
            for (char c : s) {
                if (seen[c - 'a']) {
                    std::cout << c << "\\n";
                    return 0;
                }
                seen[c - 'a'] = true;
            }
            std::cout << "NONE\\n";
        }
    """),
    python=src("""
        s = input().strip()
        seen = set()
        for c in s:
            if c in seen:
                print(c)
                break
            seen.add(c)
        else:
            print("NONE")
    """),
    wrong=[
        Wrong("python", src("""
            s = input().strip()
            for c in s:
                if s.count(c) > 1:
                    print(c)
                    break
            else:
                print("NONE")
        """), "prints the first letter that repeats somewhere later, not the first repetition reached"),
        Wrong("python", src("""
            s = input().strip()
            seen = set()
            for c in s:
                if c in seen:
                    print(c)
                    break
                seen.add(c)
        """), "prints nothing when no letter repeats"),
    ],
    public=["abcbad\n", "python\n"],
    gen=_gen_first_repeat,
    notes=["Reading a, b, c, b: the b is the first letter seen before (the a repeats later)."],
    level=LEVEL,
))


# ---------------------------------------------------------------- balanced-parentheses
def _balanced(rng: random.Random, pairs: int) -> str:
    out, depth, left = [], 0, pairs
    while left or depth:
        if left and (depth == 0 or rng.random() < 0.5):
            out.append("(")
            left -= 1
            depth += 1
        else:
            out.append(")")
            depth -= 1
    return "".join(out)


def _gen_balanced(rng: random.Random) -> list[str]:
    big = _balanced(rng, 2500)
    ws = [")(", "((", "))", "(()", "())(()", "(((())))", "()()()", big, big[1:] + "(",
          _balanced(rng, 2499) + ")(", "(" * 2500 + ")" * 2500, _balanced(rng, 20),
          ")" + _balanced(rng, 10) + "("]
    return [w + "\n" for w in ws]


add(Spec(
    name="balanced-parentheses",
    title="Balanced Brackets",
    legend="You are given a string of round brackets ( and ). It is balanced if every ( can be matched "
    "with a ) that comes after it, each bracket used once: reading left to right, there are never more "
    ") than ( so far, and at the end both counts are equal.",
    input_spec="A single line with a string of the characters ( and ).",
    output_spec="Print YES if the string is balanced, otherwise print NO.",
    constraints=["The string has between 1 and 5000 characters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            int depth = 0;
            bool ok = true;
            for (char c : s) {
                depth += c == '(' ? 1 : -1;
                if (depth < 0) ok = false;
            }
            std::cout << (ok && depth == 0 ? "YES" : "NO") << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        depth = 0
        ok = True
        for c in s:
            depth += 1 if c == "(" else -1
            if depth < 0:
                ok = False
        print("YES" if ok and depth == 0 else "NO")
    """),
    wrong=[
        Wrong("python", src("""
            s = input().strip()
            print("YES" if s.count("(") == s.count(")") else "NO")
        """), "only compares the counts, so )( is called balanced"),
        Wrong("python", src("""
            s = input().strip()
            depth = 0
            ok = True
            for c in s:
                depth += 1 if c == "(" else -1
                if depth < 0:
                    ok = False
            print("YES" if ok else "NO")
        """), "forgets to check that every ( was closed at the end"),
    ],
    public=["(()())\n", "())(\n"],
    gen=_gen_balanced,
    level=LEVEL,
))


# ---------------------------------------------------------------- most-frequent-letter
def _gen_most_frequent(rng: random.Random) -> list[str]:
    ws = ["a", "z", "zyx", "bbaa", "abab", "zzyy", "mississippi", "b" * 2500 + "a" * 2500,
          word(rng, 5000), word(rng, 5000, "xyz"), word(rng, 30), "yx" * 40]
    return [w + "\n" for w in ws]


add(Spec(
    name="most-frequent-letter",
    title="Most Common Letter",
    legend="You are given a word. Print the letter that appears in it the most times. If several letters "
    "appear the same greatest number of times, print the one that comes first in the alphabet.",
    input_spec=ONE_WORD,
    output_spec="Print one letter.",
    constraints=["The word has between 1 and 5000 letters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            int count[26] = {};
            for (char c : s) count[c - 'a']++;
            int best = 0;
            for (int i = 1; i < 26; i++)
                if (count[i] > count[best]) best = i;
            std::cout << (char)('a' + best) << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        best = "a"
        for c in "abcdefghijklmnopqrstuvwxyz":
            if s.count(c) > s.count(best):
                best = c
        print(best)
    """),
    wrong=[
        Wrong("python", src("""
            s = input().strip()
            print(max(s, key=s.count))
        """), "on a tie takes the letter that appears first in the word, not in the alphabet"),
        Wrong("python", src("""
            s = input().strip()
            best = "a"
            for c in "abcdefghijklmnopqrstuvwxyz":
                if s.count(c) >= s.count(best):
                    best = c
            print(best)
        """), "uses >=, so a tie goes to the letter last in the alphabet"),
    ],
    public=["banana\n", "cabbac\n"],
    gen=_gen_most_frequent,
    notes=["a appears 3 times.", "a, b and c appear twice each; a comes first in the alphabet."],
    level=LEVEL,
))


# ---------------------------------------------------------------- interleave-words
def _gen_interleave(rng: random.Random) -> list[str]:
    out = [_pair("a", "b"), _pair("a", "xyz"), _pair("abcd", "x"), _pair("ab", "cd"), _pair("zz", "zz"),
           _pair(word(rng, 2500), word(rng, 2500)), _pair(word(rng, 4000), word(rng, 3)),
           _pair(word(rng, 2), word(rng, 4000))]
    for _ in range(3):
        out.append(_pair(word(rng, rng.randint(1, 20)), word(rng, rng.randint(1, 20))))
    return out


add(Spec(
    name="interleave-words",
    title="Zip Two Words",
    legend="You are given two words s and t. Build a new word by taking letters alternately: the first "
    "letter of s, the first letter of t, the second letter of s, the second letter of t, and so on. "
    "When one word runs out of letters, add the rest of the other word at the end.",
    input_spec=TWO_WORDS,
    output_spec="Print the new word.",
    constraints=["|s| >= 1 and |t| >= 1", "|s| + |t| <= 5000"],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s, t, out;
            std::cin >> s >> t;
            for (size_t i = 0; i < s.size() || i < t.size(); i++) {
                if (i < s.size()) out += s[i];
                if (i < t.size()) out += t[i];
            }
            std::cout << out << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        t = input().strip()
        out = ""
        for i in range(max(len(s), len(t))):
            if i < len(s):
                out += s[i]
            if i < len(t):
                out += t[i]
        print(out)
    """),
    wrong=[
        Wrong("python", src("""
            s = input().strip()
            t = input().strip()
            print("".join(x + y for x, y in zip(s, t)))
        """), "zip stops at the shorter word and drops the rest of the longer one"),
        Wrong("python", src("""
            s = input().strip()
            t = input().strip()
            out = ""
            for i in range(max(len(s), len(t))):
                if i < len(t):
                    out += t[i]
                if i < len(s):
                    out += s[i]
            print(out)
        """), "starts with the letter of t instead of s"),
    ],
    public=["abc\nxyz\n", "hello\nab\n"],
    gen=_gen_interleave,
    notes=["", "h a e b, then the rest of hello: llo."],
    level=LEVEL,
))


# ---------------------------------------------------------------- overlapping-occurrences
def _gen_overlap(rng: random.Random) -> list[str]:
    out = [_pair("a", "a"), _pair("a", "b"), _pair("ab", "abc"), _pair("aaaa", "aa"), _pair("abababa", "aba"),
           _pair("xyzxyz", "xyz"), _pair("a" * 5000, "aaa"), _pair(word(rng, 5000, "ab"), "abab"),
           _pair(word(rng, 3000), "a"), _pair(word(rng, 40, "ab"), "bb"), _pair("b" + "ab" * 2000, "bab")]
    return out


add(Spec(
    name="overlapping-occurrences",
    title="Count the Pattern",
    legend="You are given a text s and a pattern p. Count the positions in s where p starts, including "
    "occurrences that overlap: in aaaa the pattern aa occurs 3 times (at positions 1, 2 and 3).",
    input_spec="Two lines: the text s on the first, the pattern p on the second, both made of lowercase "
    "English letters.",
    output_spec="Print one integer: the number of occurrences of p in s.",
    constraints=["1 <= |s| <= 5000", "1 <= |p| <= 10"],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s, p;
            std::cin >> s >> p;
            int count = 0;
            for (size_t i = 0; i + p.size() <= s.size(); i++)
                if (s.compare(i, p.size(), p) == 0) count++;
            std::cout << count << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        p = input().strip()
        count = 0
        for i in range(len(s) - len(p) + 1):
            if s[i:i + len(p)] == p:
                count += 1
        print(count)
    """),
    wrong=[
        Wrong("python", src("""
            s = input().strip()
            p = input().strip()
            print(s.count(p))
        """), "str.count skips overlapping occurrences"),
        Wrong("python", src("""
            s = input().strip()
            p = input().strip()
            count = 0
            for i in range(len(s) - len(p)):
                if s[i:i + len(p)] == p:
                    count += 1
            print(count)
        """), "the range stops one position early and misses a match at the very end"),
    ],
    public=["banana\nana\n", "abcab\nab\n"],
    gen=_gen_overlap,
    notes=["ana starts at positions 2 and 4."],
    level=LEVEL,
))


# ================================================================ simple maths


# ---------------------------------------------------------------- digital-root
def _gen_digital_root(rng: random.Random) -> list[str]:
    fixed = [0, 1, 9, 10, 18, 19, 99, 999_999_999_999_999_999, 10**18, 123_456_789, 987_654_321_987]
    return _ints(rng, fixed, 0, 10**18, avoid=(38, 7))


add(Spec(
    name="digital-root",
    title="Digital Root",
    legend="You are given a non-negative integer n. Replace n by the sum of its digits, again and again, "
    "until it has a single digit. Print that digit.",
    input_spec=ONE_INT,
    output_spec="Print one digit.",
    constraints=["0 <= n <= 10^18"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            while (n >= 10) {
                long long s = 0;
                for (; n > 0; n /= 10) s += n % 10;
                n = s;
            }
            std::cout << n << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        while n >= 10:
            n = sum(int(c) for c in str(n))
        print(n)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            print(sum(int(c) for c in str(n)))
        """), "sums the digits only once"),
        Wrong("python", src("""
            n = int(input())
            print(n % 9)
        """), "n % 9 gives 0 instead of 9 for multiples of 9"),
        Wrong("python", src("""
            n = int(input())
            while n > 10:
                n = sum(int(c) for c in str(n))
            print(n)
        """), "stops at 10, which has two digits"),
    ],
    public=["38\n", "7\n"],
    gen=_gen_digital_root,
    notes=["3 + 8 = 11, then 1 + 1 = 2."],
    level=LEVEL,
))


# ---------------------------------------------------------------- collatz-steps
def _gen_collatz(rng: random.Random) -> list[str]:
    fixed = [2, 3, 7, 27, 97, 837_799, 999_999_999, M, 670_617_279, 2**29]
    return _ints(rng, fixed, 1, M, avoid=(6, 1))


add(Spec(
    name="collatz-steps",
    title="Collatz Steps",
    legend="You are given a positive integer n. One step changes n: if n is even it becomes n / 2, and if "
    "n is odd it becomes 3 * n + 1. Count the steps until n becomes 1 (for every n allowed here it "
    "does).",
    input_spec=ONE_INT,
    output_spec="Print one integer: the number of steps (0 if n is already 1).",
    constraints=["1 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            int steps = 0;
            while (n != 1) {
                n = n % 2 == 0 ? n / 2 : 3 * n + 1;
                steps++;
            }
            std::cout << steps << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        steps = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1
        print(steps)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            steps = 1
            while n != 1:
                n = n // 2 if n % 2 == 0 else 3 * n + 1
                steps += 1
            print(steps)
        """), "counts the numbers in the sequence, one more than the steps"),
        Wrong("python", src("""
            n = int(input())
            steps = 0
            while n != 1:
                if n % 2 == 0:
                    n //= 2
                    steps += 1
                else:
                    n = 3 * n + 1
            print(steps)
        """), "counts only the halving steps"),
    ],
    public=["6\n", "1\n"],
    gen=_gen_collatz,
    notes=["6, 3, 10, 5, 16, 8, 4, 2, 1: eight steps."],
    level=LEVEL,
))


# ---------------------------------------------------------------- to-base-k
def _gen_base_k(rng: random.Random) -> list[str]:
    pairs = [(0, 2), (1, 9), (2, 2), (8, 8), (9, 3), (10**18, 2), (10**18, 9), (10**18 - 1, 7), (80, 9),
             (123_456_789, 5)]
    pairs += [(rng.randint(0, 10**18), rng.randint(2, 9)) for _ in range(3)]
    return [line(n, k) for n, k in pairs]


add(Spec(
    name="to-base-k",
    title="Another Base",
    legend="You are given integers n and k. Write n in base k: the digits d_m ... d_1 d_0 (each from 0 "
    "to k - 1, the first one not 0 unless n = 0) with n = d_m * k^m + ... + d_1 * k + d_0.",
    input_spec="A single line with two integers n and k.",
    output_spec="Print the digits of n in base k with nothing between them.",
    constraints=["0 <= n <= 10^18", "2 <= k <= 9"],
    cpp=src("""
        #include <algorithm>
        #include <iostream>
        #include <string>
        int main() {
            long long n, k;
            std::cin >> n >> k;
            std::string digits;
            while (n > 0) {
                digits += (char)('0' + n % k);
                n /= k;
            }
            if (digits.empty()) digits = "0";
            std::reverse(digits.begin(), digits.end());
            std::cout << digits << "\\n";
        }
    """),
    python=src("""
        n, k = map(int, input().split())
        digits = ""
        while n > 0:
            digits = str(n % k) + digits
            n //= k
        print(digits or "0")
    """),
    wrong=[
        Wrong("python", src("""
            n, k = map(int, input().split())
            digits = ""
            while n > 0:
                digits += str(n % k)
                n //= k
            print(digits or "0")
        """), "writes the digits in reverse order"),
        Wrong("python", src("""
            n, k = map(int, input().split())
            digits = ""
            while n > 0:
                digits = str(n % k) + digits
                n //= k
            print(digits)
        """), "prints nothing for n = 0"),
    ],
    public=["10 3\n", "5 2\n"],
    gen=_gen_base_k,
    notes=["10 = 1 * 9 + 0 * 3 + 1."],
    level=LEVEL,
))


# ---------------------------------------------------------------- fibonacci-nth
def _gen_fib(rng: random.Random) -> list[str]:
    return _ints(rng, [2, 3, 4, 10, 46, 47, 48, 60, 89, 90], 1, 90, avoid=(6, 1))


add(Spec(
    name="fibonacci-nth",
    title="Fibonacci Number",
    legend="The Fibonacci numbers are F_1 = 1, F_2 = 1, and from then on each is the sum of the two before "
    "it: 1, 1, 2, 3, 5, 8, 13, ... You are given n; print F_n.",
    input_spec=ONE_INT,
    output_spec="Print one integer: F_n.",
    constraints=["1 <= n <= 90", "F_90 fits in a signed 64-bit integer."],
    cpp=src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            long long a = 1, b = 1;
            for (int i = 1; i < n; i++) {
                long long c = a + b;
                a = b;
                b = c;
            }
            std::cout << a << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        a, b = 1, 1
        for _ in range(n - 1):
            a, b = b, a + b
        print(a)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            a, b = 1, 1
            for _ in range(n):
                a, b = b, a + b
            print(a)
        """), "one step too many: prints F_(n+1)"),
        Wrong("python", src("""
            n = int(input())
            a, b = 0, 1
            for _ in range(n - 1):
                a, b = b, a + b
            print(a)
        """), "starts the sequence at 0, so it prints F_(n-1)"),
        Wrong("cpp", src("""
            #include <iostream>
            int main() {
                int n, a = 1, b = 1;
                std::cin >> n;
                for (int i = 1; i < n; i++) {
                    int c = a + b;
                    a = b;
                    b = c;
                }
                std::cout << a << "\\n";
            }
        """), "32-bit int overflows from F_47"),
    ],
    public=["6\n", "1\n"],
    gen=_gen_fib,
    level=LEVEL,
))


# ---------------------------------------------------------------- armstrong-number
def _gen_armstrong(rng: random.Random) -> list[str]:
    fixed = [1, 9, 10, 370, 371, 407, 1634, 8208, 9474, 9475, 54748, 548834, 912985153, 912985154, M, 100]
    return _ints(rng, fixed, 1, M, k=2, avoid=(153, 154))


add(Spec(
    name="armstrong-number",
    title="Armstrong Numbers",
    legend="A number with k digits is an Armstrong number if it equals the sum of its digits, each raised "
    "to the power k. For example 153 has 3 digits and 1^3 + 5^3 + 3^3 = 153. Every one-digit number is "
    "an Armstrong number. You are given n; decide whether it is one.",
    input_spec=ONE_INT,
    output_spec="Print YES if n is an Armstrong number, otherwise print NO.",
    constraints=["1 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            long long total = 0;
            for (char c : s) {
                long long p = 1;
                for (size_t i = 0; i < s.size(); i++) p *= c - '0';
                total += p;
            }
            std::cout << (total == std::stoll(s) ? "YES" : "NO") << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        k = len(s)
        print("YES" if sum(int(c) ** k for c in s) == int(s) else "NO")
    """),
    wrong=[
        Wrong("python", src("""
            s = input().strip()
            print("YES" if sum(int(c) ** 3 for c in s) == int(s) else "NO")
        """), "always uses cubes, right only for three-digit numbers"),
        Wrong("python", src("""
            s = input().strip()
            print("YES" if sum(int(c) for c in s) == int(s) else "NO")
        """), "forgets the power: compares n with its digit sum"),
    ],
    public=["153\n", "154\n"],
    gen=_gen_armstrong,
    notes=["1 + 125 + 27 = 153.", "1 + 125 + 64 = 190."],
    level=LEVEL,
))


# ---------------------------------------------------------------- trailing-zeros-factorial
def _gen_fact_zeros(rng: random.Random) -> list[str]:
    fixed = [1, 4, 5, 24, 25, 26, 124, 125, 625, 3125, M, 999_999_999, 390_625]
    return _ints(rng, fixed, 1, M, avoid=(10, 100))


add(Spec(
    name="trailing-zeros-factorial",
    title="Zeros at the End of n!",
    legend="n! (n factorial) is 1 * 2 * ... * n. You are given n; print how many zeros n! ends with. "
    "For example 10! = 3628800 ends with 2 zeros. n can be large, so do not compute n! itself: every "
    "zero at the end comes from a factor 5 (paired with a factor 2, of which there are more), so count "
    "the multiples of 5, then of 25, then of 125, and so on, up to n.",
    input_spec=ONE_INT,
    output_spec="Print one integer: the number of trailing zeros of n!.",
    constraints=["1 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n, count = 0;
            std::cin >> n;
            for (long long p = 5; p <= n; p *= 5) count += n / p;
            std::cout << count << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        count = 0
        p = 5
        while p <= n:
            count += n // p
            p *= 5
        print(count)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            print(n // 5)
        """), "counts only the multiples of 5, missing the extra 5 in 25, 125, ..."),
        Wrong("python", src("""
            n = int(input())
            count = 0
            p = 5
            while p < n:
                count += n // p
                p *= 5
            print(count)
        """), "p < n skips p = n when n is a power of 5"),
    ],
    public=["10\n", "100\n"],
    gen=_gen_fact_zeros,
    notes=["", "100 // 5 + 100 // 25 = 20 + 4 = 24."],
    level=LEVEL,
))


# ---------------------------------------------------------------- savings-years
def _gen_savings(rng: random.Random) -> list[str]:
    ts = [(100, 1, 100), (100, 1, 101), (100, 1, 10**16), (100, 100, 10**16), (150, 10, 200), (199, 1, 205),
          (10**16, 5, 10**16), (999, 3, 10**15), (100, 50, 151)]
    for _ in range(4):
        a = rng.randint(100, 10**6)
        ts.append((a, rng.randint(1, 100), rng.randint(a, 10**16)))
    return [line(*t) for t in ts]


add(Spec(
    name="savings-years",
    title="Savings Account",
    legend="You put a coins into a bank account. At the end of every year the bank adds p percent of the "
    "money in the account, rounded down to a whole coin: the amount x becomes x + floor(x * p / 100). "
    "After how many years does the account hold at least b coins?",
    input_spec="A single line with three integers a, p and b.",
    output_spec="Print one integer: the number of years (0 if a >= b already).",
    constraints=["100 <= a <= b <= 10^16", "1 <= p <= 100"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, p, b;
            std::cin >> a >> p >> b;
            int years = 0;
            while (a < b) {
                a += a * p / 100;
                years++;
            }
            std::cout << years << "\\n";
        }
    """),
    python=src("""
        a, p, b = map(int, input().split())
        years = 0
        while a < b:
            a += a * p // 100
            years += 1
        print(years)
    """),
    wrong=[
        Wrong("python", src("""
            a, p, b = map(int, input().split())
            years = 0
            while a < b:
                a = a * (1 + p / 100)
                years += 1
            print(years)
        """), "keeps the fractions of a coin instead of rounding down every year"),
        Wrong("python", src("""
            a, p, b = map(int, input().split())
            years = 0
            while a <= b:
                a += a * p // 100
                years += 1
            print(years)
        """), "a <= b waits one year too long when the amount hits b exactly"),
    ],
    public=["100 10 130\n", "1000 5 1000\n"],
    gen=_gen_savings,
    notes=["100, then 110, then 121, then 133: three years.", "The account already holds b."],
    level=LEVEL,
))


# ---------------------------------------------------------------- clock-add-minutes
def _gen_clock(rng: random.Random) -> list[str]:
    ts = [("00:00", 0), ("23:59", 1), ("00:00", 1440), ("12:34", M), ("09:05", 0), ("00:59", 1),
          ("23:00", 60), ("05:07", 999_999_999), ("18:30", 330), ("10:10", 50)]
    for _ in range(3):
        ts.append((f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}", rng.randint(0, M)))
    return [f"{t}\n{k}\n" for t, k in ts]


add(Spec(
    name="clock-add-minutes",
    title="What Time Will It Be?",
    legend="A 24-hour clock shows the time hh:mm. What will it show k minutes later? After 23:59 comes "
    "00:00.",
    input_spec="The first line holds the time as hh:mm (two digits each, 00 <= hh <= 23, 00 <= mm <= 59). "
    "The second line holds the integer k.",
    output_spec="Print the new time in the same format hh:mm, with two digits for the hours and two for "
    "the minutes.",
    constraints=["0 <= k <= 10^9"],
    cpp=src("""
        #include <cstdio>
        int main() {
            int h, m;
            long long k;
            std::scanf("%d:%d %lld", &h, &m, &k);
            long long t = (h * 60 + m + k) % (24 * 60);
            std::printf("%02lld:%02lld\\n", t / 60, t % 60);
        }
    """),
    python=src("""
        h, m = map(int, input().split(":"))
        k = int(input())
        t = (h * 60 + m + k) % (24 * 60)
        print(f"{t // 60:02d}:{t % 60:02d}")
    """),
    wrong=[
        Wrong("python", src("""
            h, m = map(int, input().split(":"))
            k = int(input())
            t = (h * 60 + m + k) % (24 * 60)
            print(f"{t // 60}:{t % 60}")
        """), "no leading zeros: prints 9:5 instead of 09:05"),
        Wrong("python", src("""
            h, m = map(int, input().split(":"))
            k = int(input())
            t = h * 60 + m + k
            print(f"{t // 60:02d}:{t % 60:02d}")
        """), "forgets to wrap around after midnight"),
        Wrong("python", src("""
            h, m = map(int, input().split(":"))
            k = int(input())
            print(f"{h:02d}:{(m + k) % 60:02d}")
        """), "adds the minutes but never carries into the hours"),
    ],
    public=["13:45\n30\n", "22:10\n200\n"],
    gen=_gen_clock,
    notes=["", "200 minutes are 3 hours and 20 minutes; 22:10 + 3:20 is 01:30 the next day."],
    level=LEVEL,
))


# ---------------------------------------------------------------- greedy-coins
def _gen_coins(rng: random.Random) -> list[str]:
    fixed = [1, 4, 5, 9, 10, 24, 25, 26, 99, M, 999_999_999, 123_456_789]
    return _ints(rng, fixed, 1, M, avoid=(41, 30))


add(Spec(
    name="greedy-coins",
    title="Fewest Coins",
    legend="You have as many coins of values 1, 5, 10 and 25 as you like. Pay exactly n with as few coins "
    "as possible and print how many coins you used. (Taking the largest coin that still fits, again and "
    "again, is the best way for these values.)",
    input_spec=ONE_INT,
    output_spec="Print one integer: the smallest number of coins that add up to n.",
    constraints=["1 <= n <= 10^9"],
    cpp=src("""
        #include <initializer_list>
        #include <iostream>
        int main() {
            long long n, count = 0;
            std::cin >> n;
            for (long long coin : {25, 10, 5, 1}) {
                count += n / coin;
                n %= coin;
            }
            std::cout << count << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        count = 0
        for coin in (25, 10, 5, 1):
            count += n // coin
            n %= coin
        print(count)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            count = 0
            for coin in (25, 10, 5):
                count += n // coin
                n %= coin
            print(count)
        """), "forgets the 1-coins"),
        Wrong("python", src("""
            n = int(input())
            print(n // 25 + n % 25)
        """), "pays the rest after the 25s in 1-coins only"),
    ],
    public=["41\n", "30\n"],
    gen=_gen_coins,
    notes=["25 + 10 + 5 + 1: four coins.", "25 + 5: two coins."],
    level=LEVEL,
))


# ---------------------------------------------------------------- digits-as-words
def _gen_digit_words(rng: random.Random) -> list[str]:
    fixed = [0, 7, 10, 99, 1234567890, 10**18, 999_999_999_999_999_999, 100_200_300]
    return _ints(rng, fixed, 0, 10**18, avoid=(305, 42))


add(Spec(
    name="digits-as-words",
    title="Spell the Digits",
    legend="You are given a non-negative integer n. Spell it digit by digit: print the English name of "
    "every digit, from the first to the last. The names are zero, one, two, three, four, five, six, "
    "seven, eight and nine.",
    input_spec="A single line with one integer n, written without leading zeros.",
    output_spec="Print the names of the digits of n, in order, separated by spaces, in lowercase.",
    constraints=["0 <= n <= 10^18"],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            const char* names[] = {"zero", "one", "two", "three", "four",
                                   "five", "six", "seven", "eight", "nine"};
            std::string s;
            std::cin >> s;
            for (size_t i = 0; i < s.size(); i++)
                std::cout << names[s[i] - '0'] << (i + 1 < s.size() ? ' ' : '\\n');
        }
    """),
    python=src("""
        names = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
        s = input().strip()
        print(" ".join(names[int(c)] for c in s))
    """),
    wrong=[
        Wrong("python", src("""
            names = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "zero"]
            s = input().strip()
            print(" ".join(names[int(c)] for c in s))
        """), "the list starts at one, so every digit is named one too high"),
        Wrong("python", src("""
            names = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
            n = int(input())
            out = []
            while n > 0:
                out.append(names[n % 10])
                n //= 10
            print(" ".join(out))
        """), "takes the digits from the last one and never reverses them (and prints nothing for 0)"),
    ],
    public=["305\n", "42\n"],
    gen=_gen_digit_words,
    level=LEVEL,
))
