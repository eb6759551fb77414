"""The ladder: very easy starter problems in four levels, so that a tiny model solves some of them.

Level 1 is the prompt's worked example (read a and b, print a + b) with one change; level 2 applies one
builtin to one value; level 3 takes two small steps; level 4 is a little harder (a loop, a condition).
Every answer is one or two lines of Python. Several wrong solutions are the small model's own typical
mistakes: the example's answer hard-coded, the worked example copied for input of another shape, extra
words around the answer, a function that is never called.
"""

from __future__ import annotations

import random

from common import Spec, Wrong, array_input, line, rand_ints, src, word

SPECS: list[Spec] = []
add = SPECS.append

M = 10**9
N_MAX = 5000
LOWER = "abcdefghijklmnopqrstuvwxyz"
UPPER = LOWER.upper()
ONE_INT = "A single line with one integer n."
TWO_INTS = "A single line with two integers a and b separated by a space."
THREE_INTS = "A single line with three integers a, b and c separated by spaces."
ONE_WORD = "A single line with one word made of lowercase English letters."
LIST_INPUT = "The first line contains an integer n. The second line contains n integers a_1, ..., a_n."


def _ints(rng: random.Random, fixed: list[int], lo: int = -M, hi: int = M, k: int = 3) -> list[str]:
    """One integer per test: the fixed edge cases, then k random ones."""
    return [line(x) for x in [*fixed, *rand_ints(rng, k, lo, hi)]]


def _pairs(
    rng: random.Random, fixed: list[tuple[int, int]], lo: int = -M, hi: int = M, k: int = 3
) -> list[str]:
    pairs = [*fixed, *((rng.randint(lo, hi), rng.randint(lo, hi)) for _ in range(k))]
    return [line(a, b) for a, b in pairs]


def _triples(rng: random.Random, k: int = 3) -> list[tuple[int, int, int]]:
    ts = [(0, 0, 0), (4, -2, 9), (M, M, M), (-M, -M, -M), (M, -M, 0), (-1, -1, 5), (7, 7, -14),
          (M, M, -1), (0, -M, 1)]
    return ts + [(rng.randint(-M, M), rng.randint(-M, M), rng.randint(-M, M)) for _ in range(k)]


def _words(rng: random.Random, fixed: list[str], k: int = 4, alphabet: str = LOWER) -> list[str]:
    """One word per test: the fixed ones, a 10^4-letter one, then k random short ones."""
    ws = [*fixed, word(rng, 10**4, alphabet)]
    ws += [word(rng, rng.randint(1, 20), alphabet) for _ in range(k)]
    return [w + "\n" for w in ws]


def _words_line(rng: random.Random, n_words: int, max_gap: int = 1, max_len: int = 8) -> str:
    out = []
    for i in range(n_words):
        if i:
            out.append(" " * rng.randint(1, max_gap))
        out.append(word(rng, rng.randint(1, max_len)))
    return "".join(out)


# ================================================================ level 1: the worked example, one change


# ---------------------------------------------------------------- echo-line
def _token(rng: random.Random) -> str:
    return word(rng, rng.randint(1, 6)) if rng.random() < 0.6 else str(rng.randint(-1000, M))


def _gen_echo(rng: random.Random) -> list[str]:
    ls = ["a", "0", "-5", "abc def", "x 1 y 2", "hello world", f"{M} {-M}",
          " ".join(_token(rng) for _ in range(1000))]
    ls += [" ".join(_token(rng) for _ in range(rng.randint(2, 10))) for _ in range(3)]
    return [s + "\n" for s in ls]


add(Spec(
    name="echo-line",
    title="Echo",
    legend="Read one line and print it back unchanged.",
    input_spec="A single line of lowercase English words and integers, separated by single spaces.",
    output_spec="Print the same line.",
    constraints=["The line has between 1 and 10^4 characters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::getline(std::cin, s);
            std::cout << s << "\\n";
        }
    """),
    python=src("""
        print(input())
    """),
    wrong=[
        Wrong("python", src("""
            print(input().split()[0])
        """), "prints only the first word"),
        Wrong("python", src("""
            print("hello world 42")
        """), "prints the first example's answer instead of reading the input"),
    ],
    public=["hello world 42\n", "7\n"],
    gen=_gen_echo,
    level=1,
))


# ---------------------------------------------------------------- add-one
def _gen_add_one(rng: random.Random) -> list[str]:
    return _ints(rng, [0, -1, 1, 9, -100, 99, M, -M, M - 1, -(M - 1)])


add(Spec(
    name="add-one",
    title="Plus One",
    legend="You are given an integer n. Print n + 1.",
    input_spec=ONE_INT,
    output_spec="Print one integer: n + 1.",
    constraints=["-10^9 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << n + 1 << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(n + 1)
    """),
    wrong=[
        Wrong("python", src("""
            print(4)
        """), "prints the first example's answer instead of reading the input"),
        Wrong("python", src("""
            print(input() + "1")
        """), "adds the text 1 to the input text, so 3 becomes 31"),
    ],
    public=["3\n", "-10\n"],
    gen=_gen_add_one,
    level=1,
))


# ---------------------------------------------------------------- subtract-one
def _gen_sub_one(rng: random.Random) -> list[str]:
    return _ints(rng, [0, 1, -1, 2, 10, -99, M, -M, M - 1, 500_000_000])


add(Spec(
    name="subtract-one",
    title="Minus One",
    legend="Read an integer n and print the number that comes just before it, n - 1.",
    input_spec=ONE_INT,
    output_spec="Print one integer: n - 1.",
    constraints=["-10^9 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << n - 1 << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(n - 1)
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        print(1 - n)
    """), "computes 1 - n instead of n - 1")],
    public=["25\n", "-4\n"],
    gen=_gen_sub_one,
    level=1,
))


# ---------------------------------------------------------------- double-number
def _gen_double(rng: random.Random) -> list[str]:
    return _ints(rng, [0, 1, -1, 2, -2, 5, 100, M, -M, 999_999_999])


add(Spec(
    name="double-number",
    title="Double It",
    legend="You are given an integer n. Print 2 * n.",
    input_spec=ONE_INT,
    output_spec="Print one integer: twice n.",
    constraints=["-10^9 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << 2 * n << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(2 * n)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            print(n * n)
        """), "squares n instead of doubling it (right only for 0 and 2)"),
        Wrong("python", src("""
            def double(n):
                return 2 * n
        """), "defines a function but never reads the input or prints anything"),
    ],
    public=["7\n", "-3\n"],
    gen=_gen_double,
    level=1,
))


# ---------------------------------------------------------------- times-ten
def _gen_times_ten(rng: random.Random) -> list[str]:
    return _ints(rng, [0, 1, -1, 9, -10, 100, M, -M, 123_456_789, -999_999_999])


add(Spec(
    name="times-ten",
    title="Times Ten",
    legend="Read an integer n and print ten times n.",
    input_spec=ONE_INT,
    output_spec="Print one integer: 10 * n.",
    constraints=["-10^9 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << 10 * n << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(10 * n)
    """),
    wrong=[Wrong("python", src("""
        print(input().strip() + "0")
    """), "appends a 0 to the text, which gives 00 for n = 0")],
    public=["12\n", "-5\n"],
    gen=_gen_times_ten,
    level=1,
))


# ---------------------------------------------------------------- negate-number
def _gen_negate(rng: random.Random) -> list[str]:
    return _ints(rng, [0, 1, -1, 42, -42, M, -M, 999_999_999, -123_456_789, 7])


add(Spec(
    name="negate-number",
    title="Opposite Sign",
    legend="You are given an integer n. Print -n, the same number with the opposite sign.",
    input_spec=ONE_INT,
    output_spec="Print one integer: -n.",
    constraints=["-10^9 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << -n << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(-n)
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        print(abs(n))
    """), "prints |n|, which is wrong for positive n")],
    public=["5\n", "-12\n"],
    gen=_gen_negate,
    level=1,
))


# ---------------------------------------------------------------- a-minus-b
def _gen_a_minus_b(rng: random.Random) -> list[str]:
    return _pairs(rng, [(0, 0), (5, 5), (1, 2), (2, 1), (-3, -10), (M, -M), (-M, M), (0, M), (M, M - 1),
                        (-7, 0)])


add(Spec(
    name="a-minus-b",
    title="Subtract",
    legend="Read two integers a and b from one line and print a - b.",
    input_spec=TWO_INTS,
    output_spec="Print one integer: a - b.",
    constraints=["-10^9 <= a, b <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            std::cout << a - b << "\\n";
        }
    """),
    python=src("""
        a, b = map(int, input().split())
        print(a - b)
    """),
    wrong=[
        Wrong("python", src("""
            a, b = map(int, input().split())
            print(b - a)
        """), "subtracts in the wrong order"),
        Wrong("python", src("""
            a, b = map(int, input().split())
            print("The answer is", a - b)
        """), "prints extra words around the answer"),
    ],
    public=["10 3\n", "-2 5\n"],
    gen=_gen_a_minus_b,
    level=1,
))


# ---------------------------------------------------------------- b-minus-a
def _gen_b_minus_a(rng: random.Random) -> list[str]:
    return _pairs(rng, [(0, 0), (4, 4), (1, 2), (2, 1), (-10, -3), (M, -M), (-M, M), (M, 0), (M - 1, M),
                        (0, -7)])


add(Spec(
    name="b-minus-a",
    title="Second Minus First",
    legend="You are given two integers a and b on one line. Print b - a: the second number minus the first.",
    input_spec=TWO_INTS,
    output_spec="Print one integer: b - a.",
    constraints=["-10^9 <= a, b <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            std::cout << b - a << "\\n";
        }
    """),
    python=src("""
        a, b = map(int, input().split())
        print(b - a)
    """),
    wrong=[Wrong("python", src("""
        a, b = map(int, input().split())
        print(a - b)
    """), "computes a - b, the first minus the second")],
    public=["3 10\n", "5 -2\n"],
    gen=_gen_b_minus_a,
    level=1,
))


# ---------------------------------------------------------------- product-of-two
def _gen_product(rng: random.Random) -> list[str]:
    return _pairs(rng, [(0, 0), (2, 2), (1, -1), (0, M), (M, M), (-M, M), (-M, -M), (65536, 65536),
                        (46341, -46341), (-1, -1)])


add(Spec(
    name="product-of-two",
    title="Multiply Two Numbers",
    legend="Read two integers a and b from one line and print their product.",
    input_spec=TWO_INTS,
    output_spec="Print one integer: a * b.",
    constraints=["-10^9 <= a, b <= 10^9", "The product can exceed 32-bit integers."],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            std::cout << a * b << "\\n";
        }
    """),
    python=src("""
        a, b = map(int, input().split())
        print(a * b)
    """),
    wrong=[
        Wrong("python", src("""
            a, b = map(int, input().split())
            print(a + b)
        """), "adds the numbers instead of multiplying them"),
        Wrong("cpp", src("""
            #include <iostream>
            int main() {
                int a, b;
                std::cin >> a >> b;
                std::cout << a * b << "\\n";
            }
        """), "32-bit int: the product overflows once it passes 2147483647"),
    ],
    public=["6 7\n", "-3 4\n"],
    gen=_gen_product,
    level=1,
))


# ---------------------------------------------------------------- sum-three-ints
def _gen_sum3(rng: random.Random) -> list[str]:
    return [line(*t) for t in _triples(rng)]


add(Spec(
    name="sum-three-ints",
    title="Sum of Three",
    legend="Read three integers a, b and c from one line and print their sum.",
    input_spec=THREE_INTS,
    output_spec="Print one integer: a + b + c.",
    constraints=["-10^9 <= a, b, c <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b, c;
            std::cin >> a >> b >> c;
            std::cout << a + b + c << "\\n";
        }
    """),
    python=src("""
        a, b, c = map(int, input().split())
        print(a + b + c)
    """),
    wrong=[
        Wrong("python", src("""
            a, b = map(int, input().split())
            print(a + b)
        """), "unpacks two values from a line of three (ValueError)"),
        Wrong("cpp", src("""
            #include <iostream>
            int main() {
                int a, b, c;
                std::cin >> a >> b >> c;
                std::cout << a + b + c << "\\n";
            }
        """), "32-bit int: a sum beyond 2147483647 overflows"),
    ],
    public=["1 2 3\n", "10 -4 -6\n"],
    gen=_gen_sum3,
    level=1,
))


# ---------------------------------------------------------------- sum-two-lines
def _gen_sum_lines(rng: random.Random) -> list[str]:
    pairs = [(0, 0), (1, -1), (M, M), (-M, -M), (M, -M), (-5, 3), (7, 0), (999_999_999, 1)]
    pairs += [(rng.randint(-M, M), rng.randint(-M, M)) for _ in range(4)]
    return [f"{a}\n{b}\n" for a, b in pairs]


add(Spec(
    name="sum-two-lines",
    title="Sum on Two Lines",
    legend="Read two integers, a on the first line and b on the second, and print a + b.",
    input_spec="The first line contains the integer a. The second line contains the integer b.",
    output_spec="Print one integer: a + b.",
    constraints=["-10^9 <= a, b <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            std::cout << a + b << "\\n";
        }
    """),
    python=src("""
        a = int(input())
        b = int(input())
        print(a + b)
    """),
    wrong=[Wrong("python", src("""
        a, b = map(int, input().split())
        print(a + b)
    """), "reads both numbers from the first line, which holds only one (ValueError)")],
    public=["2\n3\n", "-4\n10\n"],
    gen=_gen_sum_lines,
    level=1,
))


# ---------------------------------------------------------------- hundred-minus-n
def _gen_hundred(rng: random.Random) -> list[str]:
    return _ints(rng, [0, 100, -100, 99, 101, 50, 1, -1, M, -M])


add(Spec(
    name="hundred-minus-n",
    title="How Far from 100",
    legend="You are given an integer n. Print 100 - n.",
    input_spec=ONE_INT,
    output_spec="Print one integer: 100 - n.",
    constraints=["-10^9 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << 100 - n << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(100 - n)
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        print(n - 100)
    """), "computes n - 100 instead of 100 - n")],
    public=["30\n", "150\n"],
    gen=_gen_hundred,
    level=1,
))


# ================================================================ level 2: one builtin on one value


# ---------------------------------------------------------------- max-of-two
def _gen_max2(rng: random.Random) -> list[str]:
    return _pairs(rng, [(9, 10), (10, 9), (100, 99), (5, 5), (-5, -10), (-10, -5), (0, -1), (M, -M),
                        (-M, -M), (2, 10)])


add(Spec(
    name="max-of-two",
    title="The Larger Number",
    legend="You are given two integers a and b. Print the larger of them (if they are equal, print that "
    "value).",
    input_spec=TWO_INTS,
    output_spec="Print one integer: the maximum of a and b.",
    constraints=["-10^9 <= a, b <= 10^9"],
    cpp=src("""
        #include <algorithm>
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            std::cout << std::max(a, b) << "\\n";
        }
    """),
    python=src("""
        a, b = map(int, input().split())
        print(max(a, b))
    """),
    wrong=[Wrong("python", src("""
        a, b = input().split()
        print(max(a, b))
    """), "compares the numbers as text, so 9 beats 10")],
    public=["3 8\n", "-2 -7\n"],
    gen=_gen_max2,
    level=2,
))


# ---------------------------------------------------------------- min-of-two
def _gen_min2(rng: random.Random) -> list[str]:
    return _pairs(rng, [(9, 10), (10, 9), (99, 100), (5, 5), (-5, -10), (-10, -5), (0, 1), (M, -M),
                        (M, M), (10, 2)])


add(Spec(
    name="min-of-two",
    title="The Smaller Number",
    legend="You are given two integers a and b. Print the smaller of them (if they are equal, print that "
    "value).",
    input_spec=TWO_INTS,
    output_spec="Print one integer: the minimum of a and b.",
    constraints=["-10^9 <= a, b <= 10^9"],
    cpp=src("""
        #include <algorithm>
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            std::cout << std::min(a, b) << "\\n";
        }
    """),
    python=src("""
        a, b = map(int, input().split())
        print(min(a, b))
    """),
    wrong=[Wrong("python", src("""
        a, b = input().split()
        print(min(a, b))
    """), "compares the numbers as text, so 10 comes out smaller than 9")],
    public=["3 8\n", "5 -1\n"],
    gen=_gen_min2,
    level=2,
))


# ---------------------------------------------------------------- absolute-value
def _gen_abs(rng: random.Random) -> list[str]:
    return _ints(rng, [0, 1, -1, 5, -5, M, -M, 999_999_999, -123_456_789, 1000])


add(Spec(
    name="absolute-value",
    title="Absolute Value",
    legend="You are given an integer n. Print its absolute value: n without its minus sign.",
    input_spec=ONE_INT,
    output_spec="Print one non-negative integer: |n|.",
    constraints=["-10^9 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << (n < 0 ? -n : n) << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(abs(n))
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        print(-n)
    """), "negates every number, which is wrong for positive n")],
    public=["-7\n", "4\n"],
    gen=_gen_abs,
    level=2,
))


# ---------------------------------------------------------------- half-of-number
def _gen_half(rng: random.Random) -> list[str]:
    return _ints(rng, [0, 1, 2, 3, 10, 99, M, M - 1, 123_456_789, 2**30 + 1], lo=0)


add(Spec(
    name="half-of-number",
    title="Half, Rounded Down",
    legend="You are given a non-negative integer n. Print n divided by 2, rounded down: 7 gives 3.",
    input_spec=ONE_INT,
    output_spec="Print one integer: n / 2 rounded down.",
    constraints=["0 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << n / 2 << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(n // 2)
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        print(n / 2)
    """), "true division prints 4.0 or 3.5 instead of an integer")],
    public=["8\n", "7\n"],
    gen=_gen_half,
    level=2,
))


# ---------------------------------------------------------------- remainder-by-two
def _gen_rem2(rng: random.Random) -> list[str]:
    return _ints(rng, [0, 1, 2, 3, 4, 11, M, M - 1, 123_456_788, 2**30 + 1], lo=0)


add(Spec(
    name="remainder-by-two",
    title="Remainder Modulo 2",
    legend="You are given a non-negative integer n. Print the remainder of n divided by 2: "
    "0 if n is even, 1 if it is odd.",
    input_spec=ONE_INT,
    output_spec="Print one digit, 0 or 1.",
    constraints=["0 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << n % 2 << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(n % 2)
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        print(n // 2)
    """), "prints the quotient instead of the remainder")],
    public=["7\n", "10\n"],
    gen=_gen_rem2,
    level=2,
))


# ---------------------------------------------------------------- word-length
def _gen_wordlen(rng: random.Random) -> list[str]:
    return _words(rng, ["a", "z", "ab", "abc", "world", "abcdefghijklmnopqrstuvwxyz"])


add(Spec(
    name="word-length",
    title="Length of a Word",
    legend="Read a word and print how many letters it has.",
    input_spec=ONE_WORD,
    output_spec="Print one integer: the number of letters in the word.",
    constraints=["The word has between 1 and 10^4 letters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            std::cout << s.size() << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        print(len(s))
    """),
    wrong=[Wrong("python", src("""
        print(len(input().split()))
    """), "counts the words on the line, not the letters")],
    public=["hello\n", "programming\n"],
    gen=_gen_wordlen,
    level=2,
))


# ---------------------------------------------------------------- lowercase-word
def _gen_lower(rng: random.Random) -> list[str]:
    an = UPPER + "0123456789"
    return _words(rng, ["A", "Z", "0", "2024", "ABC123", "X9Y8", "WORLD", word(rng, 20, UPPER)], alphabet=an)


add(Spec(
    name="lowercase-word",
    title="Quiet Please",
    legend="You are given a word made of uppercase English letters and digits. Print it with every letter "
    "in lowercase; digits stay as they are.",
    input_spec="A single line with the word s.",
    output_spec="Print s in lowercase.",
    constraints=["1 <= |s| <= 10^4", "s contains only the characters A-Z and 0-9."],
    cpp=src("""
        #include <cctype>
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            for (char &c : s) c = (char)std::tolower((unsigned char)c);
            std::cout << s << "\\n";
        }
    """),
    python=src("""
        print(input().strip().lower())
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            for (char &c : s) c = c - 'A' + 'a';
            std::cout << s << "\\n";
        }
    """), "shifts every character, so digits turn into other symbols")],
    public=["HELLO\n", "R2D2\n"],
    gen=_gen_lower,
    level=2,
))


# ---------------------------------------------------------------- word-twice
def _gen_twice(rng: random.Random) -> list[str]:
    return _words(rng, ["a", "z", "ab", "aa", "abc", "hello"])


add(Spec(
    name="word-twice",
    title="Say It Twice",
    legend="Read a word and print it two times on one line, with one space between the copies.",
    input_spec=ONE_WORD,
    output_spec="Print the word, a space, and the word again.",
    constraints=["The word has between 1 and 10^4 letters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            std::cout << s << " " << s << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        print(s, s)
    """),
    wrong=[Wrong("python", src("""
        s = input().strip()
        print(s * 2)
    """), "writes the two copies with no space between them")],
    public=["hi\n", "code\n"],
    gen=_gen_twice,
    level=2,
))


# ---------------------------------------------------------------- first-letter
def _gen_first(rng: random.Random) -> list[str]:
    return _words(rng, ["a", "z", "ab", "ba", "xyz", "hello", "qq"])


add(Spec(
    name="first-letter",
    title="First Letter",
    legend="Read a word and print its first letter.",
    input_spec=ONE_WORD,
    output_spec="Print one letter: the first letter of the word.",
    constraints=["The word has between 1 and 10^4 letters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            std::cout << s[0] << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        print(s[0])
    """),
    wrong=[Wrong("python", src("""
        s = input().strip()
        print(s[1])
    """), "indexes from 1: prints the second letter and crashes on one-letter words")],
    public=["apple\n", "b\n"],
    gen=_gen_first,
    level=2,
))


# ---------------------------------------------------------------- last-letter
def _gen_last(rng: random.Random) -> list[str]:
    return _words(rng, ["a", "z", "ab", "ba", "xyz", "hello", "qq"])


add(Spec(
    name="last-letter",
    title="Last Letter",
    legend="Read a word and print its last letter.",
    input_spec=ONE_WORD,
    output_spec="Print one letter: the last letter of the word.",
    constraints=["The word has between 1 and 10^4 letters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            std::cout << s.back() << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        print(s[-1])
    """),
    wrong=[Wrong("python", src("""
        s = input().strip()
        print(s[0])
    """), "prints the first letter instead of the last")],
    public=["apple\n", "hi\n"],
    gen=_gen_last,
    level=2,
))


# ---------------------------------------------------------------- cube-number
def _gen_cube(rng: random.Random) -> list[str]:
    return _ints(rng, [0, 1, -1, 2, -2, 1290, 1291, -1291, 10**6, -(10**6), 999_999], -(10**6), 10**6)


add(Spec(
    name="cube-number",
    title="Cube",
    legend="You are given an integer n. Print n * n * n.",
    input_spec=ONE_INT,
    output_spec="Print one integer: the cube of n.",
    constraints=["-10^6 <= n <= 10^6", "The answer can exceed 32-bit integers."],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << n * n * n << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(n * n * n)
    """),
    wrong=[
        Wrong("python", src("""
            n = int(input())
            print(n * 3)
        """), "multiplies by 3 instead of cubing"),
        Wrong("cpp", src("""
            #include <iostream>
            int main() {
                int n;
                std::cin >> n;
                std::cout << n * n * n << "\\n";
            }
        """), "32-bit int: n * n * n overflows once |n| > 1290"),
    ],
    public=["3\n", "-4\n"],
    gen=_gen_cube,
    level=2,
))


# ---------------------------------------------------------------- first-word
def _gen_first_word(rng: random.Random) -> list[str]:
    ls = ["a", "a b", "ab c", "hello world", "x y z", "abc", _words_line(rng, 2000)]
    ls += [_words_line(rng, rng.randint(1, 10)) for _ in range(5)]
    return [s + "\n" for s in ls]


add(Spec(
    name="first-word",
    title="First Word",
    legend="You are given a line of words separated by single spaces. Print the first word.",
    input_spec="A single line of lowercase English words separated by single spaces.",
    output_spec="Print the first word of the line.",
    constraints=["The line has between 1 and 2 * 10^4 characters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            std::cout << s << "\\n";
        }
    """),
    python=src("""
        print(input().split()[0])
    """),
    wrong=[Wrong("python", src("""
        print(input())
    """), "prints the whole line")],
    public=["hello big world\n", "code\n"],
    gen=_gen_first_word,
    level=2,
))


# ---------------------------------------------------------------- greet-name
def _gen_greet(rng: random.Random) -> list[str]:
    def name(n: int) -> str:
        return rng.choice(UPPER) + word(rng, n - 1)

    ns = ["Bob", "Al", "X", "Zoe", "Maria", "World", name(1000)]
    ns += [name(rng.randint(1, 12)) for _ in range(5)]
    return [s + "\n" for s in ns]


add(Spec(
    name="greet-name",
    title="Say Hello",
    legend="Read a name and greet it: print Hello, then a comma, a space, the name and an exclamation mark.",
    input_spec="A single line with the name: one uppercase English letter followed by lowercase ones.",
    output_spec="Print Hello, NAME! where NAME is the given name.",
    constraints=["The name has between 1 and 1000 letters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            std::cout << "Hello, " << s << "!\\n";
        }
    """),
    python=src("""
        name = input().strip()
        print("Hello, " + name + "!")
    """),
    wrong=[
        Wrong("python", src("""
            name = input().strip()
            print("Hello", name + "!")
        """), "leaves out the comma after Hello"),
        Wrong("python", src("""
            print("Hello, World!")
        """), "greets the world instead of reading the name"),
    ],
    public=["Alice\n"],
    gen=_gen_greet,
    level=2,
))


# ================================================================ level 3: two small steps


# ---------------------------------------------------------------- rectangle-perimeter
def _gen_perimeter(rng: random.Random) -> list[str]:
    return _pairs(rng, [(1, 1), (1, 2), (2, 1), (7, 7), (100, 1), (M, M), (M, 1), (123_456_789, 987_654_321),
                        (2, 3), (10, 20)], lo=1)


add(Spec(
    name="rectangle-perimeter",
    title="Perimeter of a Rectangle",
    legend="A rectangle has sides a and b. Print its perimeter, 2 * (a + b).",
    input_spec=TWO_INTS,
    output_spec="Print one integer: the perimeter.",
    constraints=["1 <= a, b <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            std::cout << 2 * (a + b) << "\\n";
        }
    """),
    python=src("""
        a, b = map(int, input().split())
        print(2 * (a + b))
    """),
    wrong=[
        Wrong("python", src("""
            a, b = map(int, input().split())
            print(a + b * 2)
        """), "operator precedence: computes a + 2 * b"),
        Wrong("python", src("""
            a, b = map(int, input().split())
            print(a * b)
        """), "prints the area instead of the perimeter"),
    ],
    public=["3 5\n", "4 4\n"],
    gen=_gen_perimeter,
    level=3,
))


# ---------------------------------------------------------------- multiply-then-add
def _gen_mul_add(rng: random.Random) -> list[str]:
    ts = [(0, 0, 0), (1, 1, 1), (M, M, M), (-M, M, -M), (-M, -M, M), (0, 5, -7), (2, 3, -6), (-1, -1, -1),
          (M, -M, 0), (7, 0, 3)]
    ts += [(rng.randint(-M, M), rng.randint(-M, M), rng.randint(-M, M)) for _ in range(3)]
    return [line(*t) for t in ts]


add(Spec(
    name="multiply-then-add",
    title="Multiply, Then Add",
    legend="Read three integers a, b and c from one line and print a * b + c.",
    input_spec=THREE_INTS,
    output_spec="Print one integer: a * b + c.",
    constraints=["-10^9 <= a, b, c <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b, c;
            std::cin >> a >> b >> c;
            std::cout << a * b + c << "\\n";
        }
    """),
    python=src("""
        a, b, c = map(int, input().split())
        print(a * b + c)
    """),
    wrong=[Wrong("python", src("""
        a, b, c = map(int, input().split())
        print(a * (b + c))
    """), "adds before multiplying: computes a * (b + c)")],
    public=["2 3 4\n", "-1 5 5\n"],
    gen=_gen_mul_add,
    level=3,
))


# ---------------------------------------------------------------- average-of-two
def _gen_avg(rng: random.Random) -> list[str]:
    pairs = [(0, 0), (1, 1), (-1, 1), (-1, -3), (M, M), (-M, -M), (M, -M), (999_999_999, 1), (2, 4),
             (-7, 3)]
    for _ in range(3):
        a = rng.randint(-M, M)
        b = rng.randint(-M, M - 1)
        pairs.append((a, b + (a + b) % 2))
    return [line(a, b) for a, b in pairs]


add(Spec(
    name="average-of-two",
    title="Average of Two",
    legend="You are given two integers a and b whose sum is even. Print their average, (a + b) / 2, which "
    "is then a whole number.",
    input_spec=TWO_INTS,
    output_spec="Print one integer: (a + b) / 2.",
    constraints=["-10^9 <= a, b <= 10^9", "a + b is even."],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            std::cout << (a + b) / 2 << "\\n";
        }
    """),
    python=src("""
        a, b = map(int, input().split())
        print((a + b) // 2)
    """),
    wrong=[
        Wrong("python", src("""
            a, b = map(int, input().split())
            print((a + b) / 2)
        """), "true division prints 7.0 instead of 7"),
        Wrong("python", src("""
            a, b = map(int, input().split())
            print(a + b // 2)
        """), "operator precedence: halves only b"),
    ],
    public=["4 10\n", "-3 5\n"],
    gen=_gen_avg,
    level=3,
))


# ---------------------------------------------------------------- letters-without-spaces
def _gen_nospace(rng: random.Random) -> list[str]:
    ls = ["a", "a b", "a  b", "abc", "x   y    z", "good day", _words_line(rng, 1500, 3, 6),
          word(rng, 50)]
    ls += [_words_line(rng, rng.randint(1, 12), 3) for _ in range(4)]
    return [s + "\n" for s in ls]


add(Spec(
    name="letters-without-spaces",
    title="Count Without Spaces",
    legend="You are given a line of words separated by spaces. Print how many characters it has when the "
    "spaces are not counted.",
    input_spec="A single line of lowercase English words separated by one or more spaces. It does not "
    "start or end with a space.",
    output_spec="Print one integer: the number of characters that are not spaces.",
    constraints=["The line has between 1 and 10^4 characters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::getline(std::cin, s);
            int n = 0;
            for (char c : s)
                if (c != ' ' && c != '\\r' && c != '\\n') n++;
            std::cout << n << "\\n";
        }
    """),
    python=src("""
        s = input()
        print(len(s.replace(" ", "")))
    """),
    wrong=[Wrong("python", src("""
        print(len(input()))
    """), "counts the spaces too")],
    public=["hello world\n", "a  b c\n"],
    gen=_gen_nospace,
    level=3,
))


# ---------------------------------------------------------------- say-it-n-times
def _gen_say_n(rng: random.Random) -> list[str]:
    ts = [("a", 1), ("ab", 1), ("z", 2), ("abcdefghij", 1000), ("x", 1000), ("hey", 4), ("aa", 2)]
    ts += [(word(rng, rng.randint(1, 10)), rng.randint(1, 1000)) for _ in range(5)]
    return [f"{w} {k}\n" for w, k in ts]


add(Spec(
    name="say-it-n-times",
    title="Say It n Times",
    legend="You are given a word s and a positive integer n. Print s n times on one line, separated by "
    "single spaces.",
    input_spec="A single line with the word s (lowercase English letters) and the integer n, separated by "
    "a space.",
    output_spec="Print one line with n copies of s separated by spaces.",
    constraints=["1 <= |s| <= 10", "1 <= n <= 1000"],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            int n;
            std::cin >> s >> n;
            for (int i = 0; i < n; i++) std::cout << s << (i + 1 < n ? ' ' : '\\n');
        }
    """),
    python=src("""
        s, n = input().split()
        print(" ".join([s] * int(n)))
    """),
    wrong=[Wrong("python", src("""
        s, n = input().split()
        print(s * int(n))
    """), "joins the copies with no spaces between them")],
    public=["hi 3\n", "code 1\n"],
    gen=_gen_say_n,
    level=3,
))


# ---------------------------------------------------------------- one-to-n
def _gen_one_to_n(rng: random.Random) -> list[str]:
    return _ints(rng, [1, 2, 3, 10, 100, 1000, 9999, 10**4], lo=1, hi=10**4, k=2)


add(Spec(
    name="one-to-n",
    title="Count to n",
    legend="You are given a positive integer n. Print the numbers 1, 2, ..., n on one line, separated by "
    "spaces.",
    input_spec=ONE_INT,
    output_spec="Print n integers: 1 2 ... n.",
    constraints=["1 <= n <= 10^4"],
    cpp=src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            for (int i = 1; i <= n; i++) std::cout << i << (i < n ? ' ' : '\\n');
        }
    """),
    python=src("""
        n = int(input())
        print(*range(1, n + 1))
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        print(*range(n))
    """), "range(n) goes from 0 to n - 1")],
    public=["5\n", "7\n"],
    gen=_gen_one_to_n,
    level=3,
))


# ---------------------------------------------------------------- sum-three-lines
def _gen_sum3_lines(rng: random.Random) -> list[str]:
    return ["".join(f"{x}\n" for x in t) for t in _triples(rng)]


add(Spec(
    name="sum-three-lines",
    title="Three Lines, One Sum",
    legend="Read three integers, each on its own line, and print their sum.",
    input_spec="Three lines, each with one integer: a, b and c.",
    output_spec="Print one integer: a + b + c.",
    constraints=["-10^9 <= a, b, c <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b, c;
            std::cin >> a >> b >> c;
            std::cout << a + b + c << "\\n";
        }
    """),
    python=src("""
        a = int(input())
        b = int(input())
        c = int(input())
        print(a + b + c)
    """),
    wrong=[Wrong("python", src("""
        a, b, c = map(int, input().split())
        print(a + b + c)
    """), "reads all three numbers from the first line, which holds only one (ValueError)")],
    public=["1\n2\n3\n", "-5\n0\n7\n"],
    gen=_gen_sum3_lines,
    level=3,
))


# ---------------------------------------------------------------- swap-two
def _gen_swap(rng: random.Random) -> list[str]:
    return _pairs(rng, [(0, 1), (1, 0), (5, 5), (-1, 1), (M, -M), (-M, M), (M, M - 1), (0, 0), (12, -34),
                        (999_999_999, 3)])


add(Spec(
    name="swap-two",
    title="Swap",
    legend="You are given two integers a and b on one line. Print them in the opposite order: first b, "
    "then a.",
    input_spec=TWO_INTS,
    output_spec="Print b and a on one line, separated by a space.",
    constraints=["-10^9 <= a, b <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            std::cout << b << " " << a << "\\n";
        }
    """),
    python=src("""
        a, b = map(int, input().split())
        print(b, a)
    """),
    wrong=[Wrong("python", src("""
        a, b = map(int, input().split())
        print(a, b)
    """), "prints them in the original order")],
    public=["1 2\n", "-7 30\n"],
    gen=_gen_swap,
    level=3,
))


# ---------------------------------------------------------------- sum-and-difference
def _gen_sum_diff(rng: random.Random) -> list[str]:
    return _pairs(rng, [(0, 0), (1, 2), (2, 1), (5, 5), (-3, -8), (M, M), (-M, M), (M, -M), (0, -1),
                        (999_999_999, 1)])


add(Spec(
    name="sum-and-difference",
    title="Sum and Difference",
    legend="Read two integers a and b and print two numbers on one line: a + b and then a - b.",
    input_spec=TWO_INTS,
    output_spec="Print two integers separated by a space: a + b and a - b.",
    constraints=["-10^9 <= a, b <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            std::cout << a + b << " " << a - b << "\\n";
        }
    """),
    python=src("""
        a, b = map(int, input().split())
        print(a + b, a - b)
    """),
    wrong=[Wrong("python", src("""
        a, b = map(int, input().split())
        print(a + b, b - a)
    """), "subtracts in the wrong order: prints b - a")],
    public=["7 3\n", "-2 5\n"],
    gen=_gen_sum_diff,
    level=3,
))


# ---------------------------------------------------------------- minutes-to-hours
def _gen_minutes(rng: random.Random) -> list[str]:
    return _ints(rng, [0, 1, 59, 60, 61, 119, 120, 1439, 1440, M, M - 1], lo=0, k=2)


add(Spec(
    name="minutes-to-hours",
    title="Hours and Minutes",
    legend="A film lasts n minutes. Print how many full hours that is and how many minutes are left over.",
    input_spec=ONE_INT,
    output_spec="Print two integers on one line separated by a space: the number of full hours and the "
    "remaining minutes (from 0 to 59).",
    constraints=["0 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << n / 60 << " " << n % 60 << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(n // 60, n % 60)
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        print(n / 60, n % 60)
    """), "true division prints 2.25 instead of 2 full hours")],
    public=["135\n", "45\n"],
    notes=["135 minutes are 2 hours and 15 minutes."],
    gen=_gen_minutes,
    level=3,
))


# ================================================================ level 4: a loop or a condition


# ---------------------------------------------------------------- sum-of-n-lines
def _gen_sum_lines_n(rng: random.Random) -> list[str]:
    ls = [[0], [-5], [7, 7, 7], [-3, -1, -2], [M, M, M], [M] * N_MAX, [-M, M], [1, 0, -1, 0],
          rand_ints(rng, 10, -20, 20), rand_ints(rng, 100, -M, M), rand_ints(rng, N_MAX, -M, M)]
    return [f"{len(xs)}\n" + "".join(f"{x}\n" for x in xs) for xs in ls]


add(Spec(
    name="sum-of-n-lines",
    title="Sum, One Number per Line",
    legend="You are given n integers, one per line. Print their sum.",
    input_spec="The first line contains an integer n. Each of the next n lines contains one integer a_i.",
    output_spec="Print one integer: a_1 + a_2 + ... + a_n.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            long long s = 0;
            for (int i = 0; i < n; i++) { long long x; std::cin >> x; s += x; }
            std::cout << s << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        total = 0
        for _ in range(n):
            total += int(input())
        print(total)
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        a = list(map(int, input().split()))
        print(sum(a))
    """), "reads only the second line, so it sums just the first number")],
    public=["3\n4\n5\n6\n", "1\n-8\n"],
    gen=_gen_sum_lines_n,
    level=4,
))


# ---------------------------------------------------------------- min-of-list
def _gen_min_list(rng: random.Random) -> list[str]:
    ls = [[0], [-5], [5], [7, 7, 7], [3, 1, 2], [M, M - 1, M], [M, -M], [1, 0, -1, 0],
          rand_ints(rng, 10, 1, 20), rand_ints(rng, 100, -M, M), rand_ints(rng, N_MAX, -M, M),
          rand_ints(rng, N_MAX, 1, M)]
    return [array_input(x) for x in ls]


add(Spec(
    name="min-of-list",
    title="Smallest Number",
    legend="You are given n integers. Print the smallest of them.",
    input_spec=LIST_INPUT,
    output_spec="Print one integer: the minimum of a_1, ..., a_n.",
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
                if (i == 0 || x < best) best = x;
            }
            std::cout << best << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        a = list(map(int, input().split()))
        print(min(a))
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        a = list(map(int, input().split()))
        best = 0
        for x in a:
            if x < best:
                best = x
        print(best)
    """), "starts the minimum at 0, wrong when every number is positive")],
    public=["5\n3 9 2 9 4\n", "1\n-6\n"],
    gen=_gen_min_list,
    level=4,
))


# ---------------------------------------------------------------- how-many-a
def _gen_count_a(rng: random.Random) -> list[str]:
    return _words(rng, ["a", "b", "aaa", "abc", "bca", "zzzz", "banana", word(rng, 10**4, "ab")])


add(Spec(
    name="how-many-a",
    title="Count the a's",
    legend="You are given a word. Print how many times the letter a appears in it.",
    input_spec=ONE_WORD,
    output_spec="Print one integer: the number of letters a in the word.",
    constraints=["The word has between 1 and 10^4 letters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            int n = 0;
            for (char c : s)
                if (c == 'a') n++;
            std::cout << n << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        print(s.count("a"))
    """),
    wrong=[
        Wrong("python", src("""
            s = input().strip()
            print("a" in s)
        """), "prints True or False instead of a count"),
        Wrong("cpp", src("""
            #include <iostream>
            #include <string>
            int main() {
                std::string s;
                std::cin >> s;
                int n = 0;
                for (size_t i = 1; i < s.size(); i++)
                    if (s[i] == 'a') n++;
                std::cout << n << "\\n";
            }
        """), "loop starts at index 1 and skips the first letter"),
    ],
    public=["java\n", "xyz\n"],
    gen=_gen_count_a,
    level=4,
))


# ---------------------------------------------------------------- is-even
def _gen_even(rng: random.Random) -> list[str]:
    return _ints(rng, [0, 1, -1, 2, -2, -7, -8, M, -M, M - 1, -(M - 1), 999_999_998])


add(Spec(
    name="is-even",
    title="Even or Not",
    legend="You are given an integer n. Decide whether it is even (divisible by 2).",
    input_spec=ONE_INT,
    output_spec="Print YES if n is even, otherwise print NO.",
    constraints=["-10^9 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << (n % 2 == 0 ? "YES" : "NO") << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print("YES" if n % 2 == 0 else "NO")
    """),
    wrong=[
        Wrong("cpp", src("""
            #include <iostream>
            int main() {
                long long n;
                std::cin >> n;
                std::cout << (n % 2 == 1 ? "NO" : "YES") << "\\n";
            }
        """), "n % 2 == 1 is false for negative odd n in C++ (the remainder is -1), so they come out even"),
        Wrong("python", src("""
            n = int(input())
            print("YES" if n % 2 else "NO")
        """), "answers the opposite question: YES for odd n"),
    ],
    public=["4\n", "7\n"],
    gen=_gen_even,
    level=4,
))


# ---------------------------------------------------------------- greater-than
def _gen_greater(rng: random.Random) -> list[str]:
    return _pairs(rng, [(0, 0), (1, 0), (0, 1), (-1, -2), (-2, -1), (5, 5), (M, -M), (-M, M), (M, M),
                        (M, M - 1), (-M, -M)])


add(Spec(
    name="greater-than",
    title="Is a Greater?",
    legend="You are given two integers a and b. Print YES if a is strictly greater than b, otherwise "
    "print NO.",
    input_spec=TWO_INTS,
    output_spec="Print YES if a > b, otherwise print NO.",
    constraints=["-10^9 <= a, b <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            std::cout << (a > b ? "YES" : "NO") << "\\n";
        }
    """),
    python=src("""
        a, b = map(int, input().split())
        print("YES" if a > b else "NO")
    """),
    wrong=[Wrong("python", src("""
        a, b = map(int, input().split())
        print("YES" if a >= b else "NO")
    """), "uses >=, so equal numbers give YES")],
    public=["5 3\n", "2 2\n"],
    gen=_gen_greater,
    level=4,
))


# ---------------------------------------------------------------- sign-of-number
def _gen_sign(rng: random.Random) -> list[str]:
    return _ints(rng, [0, 1, -1, 7, -7, 100, -100, M, -M, 999_999_999])


add(Spec(
    name="sign-of-number",
    title="Sign of a Number",
    legend="You are given an integer n. Print positive if n > 0, negative if n < 0, and zero if n = 0.",
    input_spec=ONE_INT,
    output_spec="Print one word: positive, negative or zero.",
    constraints=["-10^9 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            if (n > 0) std::cout << "positive\\n";
            else if (n < 0) std::cout << "negative\\n";
            else std::cout << "zero\\n";
        }
    """),
    python=src("""
        n = int(input())
        if n > 0:
            print("positive")
        elif n < 0:
            print("negative")
        else:
            print("zero")
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        print("positive" if n >= 0 else "negative")
    """), "never prints zero: treats 0 as positive")],
    public=["15\n", "-4\n"],
    gen=_gen_sign,
    level=4,
))


# ---------------------------------------------------------------- count-evens
def _gen_count_evens(rng: random.Random) -> list[str]:
    ls = [[0], [1], [-1], [-3, -5, -7], [2, 4, 6], [-4, -2, 0, 2, 4], [M, -M, M - 1], [7, 7, 7],
          rand_ints(rng, 10, -20, 20), rand_ints(rng, 100, -M, M), rand_ints(rng, N_MAX, -M, M),
          rand_ints(rng, N_MAX, -M, -1)]
    return [array_input(x) for x in ls]


add(Spec(
    name="count-evens",
    title="Count the Even Numbers",
    legend="You are given n integers. Count how many of them are even. Zero is even, and so are negative "
    "numbers like -4.",
    input_spec=LIST_INPUT,
    output_spec="Print one integer: the number of even a_i.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            int n, c = 0;
            std::cin >> n;
            for (int i = 0; i < n; i++) { long long x; std::cin >> x; if (x % 2 == 0) c++; }
            std::cout << c << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        a = list(map(int, input().split()))
        print(sum(1 for x in a if x % 2 == 0))
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        int main() {
            int n, odd = 0;
            std::cin >> n;
            for (int i = 0; i < n; i++) { long long x; std::cin >> x; if (x % 2 == 1) odd++; }
            std::cout << n - odd << "\\n";
        }
    """), "counts odd numbers with x % 2 == 1, which misses negative odd numbers in C++")],
    public=["5\n1 2 3 4 6\n", "3\n-3 0 -8\n"],
    gen=_gen_count_evens,
    level=4,
))


# ---------------------------------------------------------------- divides-evenly
def _gen_divides(rng: random.Random) -> list[str]:
    pairs = [(1, 1), (1, 5), (5, 1), (4, 12), (7, 7), (M, 1), (M, 2), (M, M), (999_999_937, 3), (6, 4),
             (2, M)]
    for _ in range(2):
        b = rng.randint(1, 10**5)
        pairs.append((b * rng.randint(1, M // b), b))
    return [line(a, b) for a, b in pairs]


add(Spec(
    name="divides-evenly",
    title="Divisible?",
    legend="You are given two positive integers a and b. Print YES if a is divisible by b (the remainder "
    "of a divided by b is 0), otherwise print NO.",
    input_spec=TWO_INTS,
    output_spec="Print YES if b divides a, otherwise print NO.",
    constraints=["1 <= a, b <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            std::cout << (a % b == 0 ? "YES" : "NO") << "\\n";
        }
    """),
    python=src("""
        a, b = map(int, input().split())
        print("YES" if a % b == 0 else "NO")
    """),
    wrong=[Wrong("python", src("""
        a, b = map(int, input().split())
        print("YES" if b % a == 0 else "NO")
    """), "checks whether a divides b instead")],
    public=["12 4\n", "7 2\n"],
    gen=_gen_divides,
    level=4,
))


# ---------------------------------------------------------------- starts-with-vowel
def _gen_vowel_first(rng: random.Random) -> list[str]:
    return _words(rng, ["a", "b", "y", "ab", "ba", "under", "yes", "echo", "sky", "idea", "orb",
                        "a" + word(rng, 10**4 - 2) + "b"])


add(Spec(
    name="starts-with-vowel",
    title="Vowel First",
    legend="You are given a word. Print YES if its first letter is a vowel (a, e, i, o or u), otherwise "
    "print NO. The letter y is not a vowel here.",
    input_spec=ONE_WORD,
    output_spec="Print YES or NO.",
    constraints=["The word has between 1 and 10^4 letters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            bool v = std::string("aeiou").find(s[0]) != std::string::npos;
            std::cout << (v ? "YES" : "NO") << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        print("YES" if s[0] in "aeiou" else "NO")
    """),
    wrong=[Wrong("python", src("""
        s = input().strip()
        print("YES" if s[-1] in "aeiou" else "NO")
    """), "checks the last letter instead of the first")],
    public=["apple\n", "banana\n"],
    gen=_gen_vowel_first,
    level=4,
))
