"""Starter problems about one or a few integers."""

from __future__ import annotations

import random

from common import Spec, Wrong, line, src

SPECS: list[Spec] = []
add = SPECS.append


# ---------------------------------------------------------------- square-number
def _gen_square(rng: random.Random) -> list[str]:
    xs = [0, 1, -1, 2, 46340, 46341, -46341, 10**9, -(10**9), 999_999_999]
    xs += [rng.randint(-(10**9), 10**9) for _ in range(3)]
    return [line(x) for x in xs]


add(Spec(
    name="square-number",
    title="Square Number",
    legend="You are given an integer n. Print n multiplied by itself.",
    input_spec="A single line with one integer n.",
    output_spec="Print one integer: the value of n * n.",
    constraints=["-10^9 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << n * n << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(n * n)
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            std::cout << n * n << "\\n";
        }
    """), "32-bit int: n * n overflows once |n| > 46340")],
    public=["3\n", "-4\n"],
    notes=["3 * 3 = 9.", "(-4) * (-4) = 16."],
    gen=_gen_square,
))


# ---------------------------------------------------------------- sum-of-two
def _gen_sum_two(rng: random.Random) -> list[str]:
    m = 10**18
    pairs = [(0, 0), (1, -1), (m, m), (-m, -m), (m, -m), (-5, 3), (2**31 - 1, 1), (m, m - 1)]
    pairs += [(rng.randint(-m, m), rng.randint(-m, m)) for _ in range(4)]
    return [line(a, b) for a, b in pairs]


add(Spec(
    name="sum-of-two",
    title="Sum of Two",
    legend="You are given two integers a and b. Print their sum.",
    input_spec="A single line with two integers a and b separated by a space.",
    output_spec="Print one integer: a + b.",
    constraints=["-10^18 <= a, b <= 10^18"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            std::cout << a + b << "\\n";
        }
    """),
    python=src("""
        a, b = map(int, input().split())
        print(a + b)
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        int main() {
            int a, b;
            std::cin >> a >> b;
            std::cout << a + b << "\\n";
        }
    """), "32-bit int: values beyond about 2 * 10^9 do not fit")],
    public=["2 3\n", "-7 4\n"],
    gen=_gen_sum_two,
))


# ---------------------------------------------------------------- absolute-difference
def _gen_absdiff(rng: random.Random) -> list[str]:
    m = 10**18
    pairs = [(0, 0), (5, 5), (1, 2), (2, 1), (-m, m), (m, -m), (-3, -10), (0, -m)]
    pairs += [(rng.randint(-m, m), rng.randint(-m, m)) for _ in range(4)]
    return [line(a, b) for a, b in pairs]


add(Spec(
    name="absolute-difference",
    title="Absolute Difference",
    legend="You are given two integers a and b. Print the distance between them on the number line, "
    "that is, the absolute value of a - b.",
    input_spec="A single line with two integers a and b.",
    output_spec="Print one non-negative integer: |a - b|.",
    constraints=["-10^18 <= a, b <= 10^18"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            long long d = a - b;
            if (d < 0) d = -d;
            std::cout << d << "\\n";
        }
    """),
    python=src("""
        a, b = map(int, input().split())
        print(abs(a - b))
    """),
    wrong=[
        Wrong("cpp", src("""
            #include <cstdlib>
            #include <iostream>
            int main() {
                int a, b;
                std::cin >> a >> b;
                std::cout << std::abs(a - b) << "\\n";
            }
        """), "32-bit int: values beyond about 2 * 10^9 do not fit"),
        Wrong("python", src("""
            a, b = map(int, input().split())
            print(a - b)
        """), "forgets the absolute value, negative when a < b"),
    ],
    public=["3 10\n", "-2 5\n"],
    notes=["|3 - 10| = 7."],
    gen=_gen_absdiff,
))


# ---------------------------------------------------------------- min-of-three
def _gen_min3(rng: random.Random) -> list[str]:
    m = 10**9
    ts = [(1, 1, 5), (2, 2, 2), (5, 1, 1), (3, 7, 3), (0, 0, -1), (-m, -m, m), (m, m, m),
          (-m, 0, m), (4, -2, -2)]
    ts += [tuple(rng.randint(-m, m) for _ in range(3)) for _ in range(3)]
    ts += [tuple(rng.randint(-3, 3) for _ in range(3)) for _ in range(2)]
    return [line(*t) for t in ts]


add(Spec(
    name="min-of-three",
    title="Smallest of Three",
    legend="You are given three integers a, b and c. Print the smallest of them.",
    input_spec="A single line with three integers a, b and c.",
    output_spec="Print one integer: the minimum of a, b and c.",
    constraints=["-10^9 <= a, b, c <= 10^9", "Some of the numbers may be equal."],
    cpp=src("""
        #include <algorithm>
        #include <iostream>
        int main() {
            long long a, b, c;
            std::cin >> a >> b >> c;
            std::cout << std::min({a, b, c}) << "\\n";
        }
    """),
    python=src("""
        a, b, c = map(int, input().split())
        print(min(a, b, c))
    """),
    wrong=[Wrong("python", src("""
        a, b, c = map(int, input().split())
        if a < b and a < c:
            print(a)
        elif b < a and b < c:
            print(b)
        else:
            print(c)
    """), "strict comparisons: a tie for the minimum (e.g. 1 1 5) falls through to c")],
    public=["4 2 9\n", "-1 -5 0\n"],
    gen=_gen_min3,
))


# ---------------------------------------------------------------- is-odd
def _gen_odd(rng: random.Random) -> list[str]:
    m = 10**18
    xs = [0, 1, -1, 2, -2, -7, m, -m, m - 1, -(m - 1), -999_999_999_999_999_999]
    xs += [rng.randint(-m, m) for _ in range(3)]
    return [line(x) for x in xs]


add(Spec(
    name="is-odd",
    title="Odd or Not",
    legend="You are given an integer n. Decide whether n is odd (not divisible by 2).",
    input_spec="A single line with one integer n.",
    output_spec="Print YES if n is odd, otherwise print NO.",
    constraints=["-10^18 <= n <= 10^18"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << (n % 2 != 0 ? "YES" : "NO") << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print("YES" if n % 2 != 0 else "NO")
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << (n % 2 == 1 ? "YES" : "NO") << "\\n";
        }
    """), "n % 2 == 1 is false for negative odd n in C++ (the remainder is -1)")],
    public=["7\n", "10\n"],
    gen=_gen_odd,
))


# ---------------------------------------------------------------- sum-1-to-n
def _gen_sum_n(rng: random.Random) -> list[str]:
    xs = [1, 2, 3, 10, 65535, 65536, 100000, 10**9, 10**9 - 1, 123_456_789]
    xs += [rng.randint(1, 10**9) for _ in range(3)]
    return [line(x) for x in xs]


add(Spec(
    name="sum-1-to-n",
    title="Sum from 1 to n",
    legend="You are given a positive integer n. Print the sum 1 + 2 + ... + n.",
    input_spec="A single line with one integer n.",
    output_spec="Print one integer: the sum of all integers from 1 to n.",
    constraints=["1 <= n <= 10^9", "The answer can exceed 32-bit integers."],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << n * (n + 1) / 2 << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(n * (n + 1) // 2)
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            std::cout << n * (n + 1) / 2 << "\\n";
        }
    """), "32-bit int: n * (n + 1) overflows for n above about 46000")],
    public=["4\n", "100\n"],
    notes=["1 + 2 + 3 + 4 = 10."],
    gen=_gen_sum_n,
))


# ---------------------------------------------------------------- factorial
def _gen_fact(rng: random.Random) -> list[str]:
    return [line(x) for x in [0, 1, 2, 3, 10, 12, 13, 15, 17, 19, 20]]


add(Spec(
    name="factorial",
    title="Factorial",
    legend="You are given an integer n. Print n! = 1 * 2 * ... * n. By definition, 0! = 1.",
    input_spec="A single line with one integer n.",
    output_spec="Print one integer: n!.",
    constraints=["0 <= n <= 20", "The answer fits in a signed 64-bit integer."],
    cpp=src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            long long f = 1;
            for (int i = 2; i <= n; i++) f *= i;
            std::cout << f << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        f = 1
        for i in range(2, n + 1):
            f *= i
        print(f)
    """),
    wrong=[
        Wrong("cpp", src("""
            #include <iostream>
            int main() {
                int n;
                std::cin >> n;
                int f = 1;
                for (int i = 2; i <= n; i++) f *= i;
                std::cout << f << "\\n";
            }
        """), "32-bit int: 13! and above overflow"),
        Wrong("python", src("""
            n = int(input())
            f = n
            for i in range(2, n):
                f *= i
            print(f)
        """), "starts from n instead of 1, so 0! comes out as 0"),
    ],
    public=["5\n", "4\n"],
    notes=["5! = 1 * 2 * 3 * 4 * 5 = 120."],
    gen=_gen_fact,
))


# ---------------------------------------------------------------- sum-of-digits
def _gen_digsum(rng: random.Random) -> list[str]:
    xs = [0, 5, 10, 99, 2147483647, 2147483648, 10**18, 10**18 - 1, 999_999_999_999_999_999,
          123_456_789_012_345_678]
    xs += [rng.randint(0, 10**18) for _ in range(3)]
    return [line(x) for x in xs]


add(Spec(
    name="sum-of-digits",
    title="Sum of Digits",
    legend="You are given a non-negative integer n. Print the sum of its decimal digits.",
    input_spec="A single line with one integer n (written without leading zeros).",
    output_spec="Print one integer: the sum of the digits of n.",
    constraints=["0 <= n <= 10^18"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            long long s = 0;
            while (n > 0) { s += n % 10; n /= 10; }
            std::cout << s << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        print(sum(int(c) for c in s))
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            int s = 0;
            while (n > 0) { s += n % 10; n /= 10; }
            std::cout << s << "\\n";
        }
    """), "reads n into a 32-bit int, so values above 2147483647 are garbled")],
    public=["1234\n", "9\n"],
    notes=["1 + 2 + 3 + 4 = 10."],
    gen=_gen_digsum,
))


# ---------------------------------------------------------------- last-digit
def _gen_lastdig(rng: random.Random) -> list[str]:
    m = 10**18
    xs = [0, 7, -7, -10, 10, -1, m, -m, m - 1, -(m - 1), -123_456_789_123_456_783]
    xs += [rng.randint(-m, m) for _ in range(3)]
    return [line(x) for x in xs]


add(Spec(
    name="last-digit",
    title="Last Digit",
    legend="You are given an integer n, possibly negative. Print the last digit of n when it is "
    "written in decimal (the sign does not matter: the last digit of -25 is 5).",
    input_spec="A single line with one integer n.",
    output_spec="Print one digit from 0 to 9.",
    constraints=["-10^18 <= n <= 10^18"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            long long d = n % 10;
            if (d < 0) d = -d;
            std::cout << d << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(abs(n) % 10)
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        print(n % 10)
    """), "Python's % is non-negative, so -7 % 10 gives 3 instead of 7")],
    public=["1234\n", "90\n"],
    gen=_gen_lastdig,
))


# ---------------------------------------------------------------- count-digits
def _gen_ndig(rng: random.Random) -> list[str]:
    xs = [0, 1, 9, 10, 99, 100, 2147483647, 10**17, 10**18, 10**18 - 1]
    xs += [rng.randint(0, 10 ** rng.randint(1, 18)) for _ in range(3)]
    return [line(x) for x in xs]


add(Spec(
    name="count-digits",
    title="Number of Digits",
    legend="You are given a non-negative integer n written without leading zeros. "
    "Print how many digits it has. The number 0 has one digit.",
    input_spec="A single line with one integer n.",
    output_spec="Print one integer: the number of decimal digits of n.",
    constraints=["0 <= n <= 10^18"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            int c = 1;
            while (n >= 10) { n /= 10; c++; }
            std::cout << c << "\\n";
        }
    """),
    python=src("""
        print(len(input().strip()))
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            int c = 0;
            while (n > 0) { n /= 10; c++; }
            std::cout << c << "\\n";
        }
    """), "counts 0 digits for n = 0")],
    public=["12345\n", "7\n"],
    gen=_gen_ndig,
))


# ---------------------------------------------------------------- reverse-digits
def _gen_revdig(rng: random.Random) -> list[str]:
    xs = [1, 10, 100, 1200, 9, 1001, 10**18, 999_999_999_999_999_999, 120_000_000_000_000_000,
          505]
    xs += [rng.randint(1, 10**18) for _ in range(2)]
    xs += [rng.randint(1, 10**6) * 1000 for _ in range(2)]
    return [line(x) for x in xs]


add(Spec(
    name="reverse-digits",
    title="Reverse the Digits",
    legend="You are given a positive integer n. Write its digits in reverse order and print the "
    "resulting number without leading zeros. For example, 1200 becomes 21.",
    input_spec="A single line with one integer n (without leading zeros).",
    output_spec="Print the reversed number, without leading zeros.",
    constraints=["1 <= n <= 10^18"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            long long r = 0;
            while (n > 0) { r = r * 10 + n % 10; n /= 10; }
            std::cout << r << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        print(int(s[::-1]))
    """),
    wrong=[Wrong("python", src("""
        s = input().strip()
        print(s[::-1])
    """), "reverses the text, keeping leading zeros (1200 -> 0021)")],
    public=["123\n", "7\n"],
    gen=_gen_revdig,
))


# ---------------------------------------------------------------- is-prime
def _primes_upto(n: int) -> list[int]:
    sieve = bytearray([1]) * (n + 1)
    sieve[0:2] = b"\x00\x00"
    for i in range(2, int(n**0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(sieve[i * i :: i]))
    return [i for i in range(n + 1) if sieve[i]]


def _gen_prime(rng: random.Random) -> list[str]:
    ps = [p for p in _primes_upto(31622) if p > 30000]  # p * q <= 10^9
    xs = [1, 2, 3, 4, 9, 25, 97, 999_999_937, 10**9, ps[-1] * ps[-2], ps[-1] * ps[-1], 2 * 499_999_999]
    xs += [rng.randint(1, 10**9) for _ in range(2)]
    return [line(x) for x in xs]


add(Spec(
    name="is-prime",
    title="Prime Check",
    legend="You are given a positive integer n. Decide whether n is prime: a prime has exactly two "
    "divisors, 1 and itself. Note that 1 is not prime.",
    input_spec="A single line with one integer n.",
    output_spec="Print YES if n is prime, otherwise print NO.",
    constraints=["1 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            bool prime = n >= 2;
            for (long long d = 2; d * d <= n; d++)
                if (n % d == 0) { prime = false; break; }
            std::cout << (prime ? "YES" : "NO") << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        prime = n >= 2
        d = 2
        while d * d <= n:
            if n % d == 0:
                prime = False
                break
            d += 1
        print("YES" if prime else "NO")
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        prime = True
        d = 2
        while d * d <= n:
            if n % d == 0:
                prime = False
                break
            d += 1
        print("YES" if prime else "NO")
    """), "reports 1 as prime")],
    public=["7\n", "12\n"],
    gen=_gen_prime,
))


# ---------------------------------------------------------------- count-divisors
def _gen_ndiv(rng: random.Random) -> list[str]:
    xs = [1, 2, 4, 16, 36, 97, 999_999_937, 10**9, 735_134_400, 31622 * 31622, 30030]
    xs += [rng.randint(1, 10**9) for _ in range(2)]
    return [line(x) for x in xs]


add(Spec(
    name="count-divisors",
    title="Count the Divisors",
    legend="You are given a positive integer n. Print how many positive integers divide n exactly.",
    input_spec="A single line with one integer n.",
    output_spec="Print one integer: the number of divisors of n.",
    constraints=["1 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            long long c = 0;
            for (long long d = 1; d * d <= n; d++)
                if (n % d == 0) c += (d * d == n) ? 1 : 2;
            std::cout << c << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        c = 0
        d = 1
        while d * d <= n:
            if n % d == 0:
                c += 1 if d * d == n else 2
            d += 1
        print(c)
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        c = 0
        d = 1
        while d * d <= n:
            if n % d == 0:
                c += 2
            d += 1
        print(c)
    """), "counts the square root twice for perfect squares")],
    public=["6\n", "12\n"],
    notes=["The divisors of 6 are 1, 2, 3 and 6."],
    gen=_gen_ndiv,
))


# ---------------------------------------------------------------- gcd-two
def _gen_gcd(rng: random.Random) -> list[str]:
    t = 10**12
    pairs = [(1, 1), (1, t), (t, 1), (t, t), (7, 7), (12, 18), (t, t - 1), (999_999_999_989, 2),
             (2**39, 2**20 * 3)]
    pairs += [(rng.randint(1, t), rng.randint(1, t)) for _ in range(2)]
    g = rng.randint(1, 10**6)
    pairs.append((g * rng.randint(1, 10**6), g * rng.randint(1, 10**6)))
    return [line(a, b) for a, b in pairs]


add(Spec(
    name="gcd-two",
    title="Greatest Common Divisor",
    legend="You are given two positive integers a and b. Print the largest integer that divides both.",
    input_spec="A single line with two integers a and b.",
    output_spec="Print one integer: gcd(a, b).",
    constraints=["1 <= a, b <= 10^12"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            while (b != 0) { long long t = a % b; a = b; b = t; }
            std::cout << a << "\\n";
        }
    """),
    python=src("""
        import math
        a, b = map(int, input().split())
        print(math.gcd(a, b))
    """),
    wrong=[Wrong("python", src("""
        a, b = map(int, input().split())
        while a != b:
            if a > b:
                a -= b
            else:
                b -= a
        print(a)
    """), "subtraction-only Euclid: far too slow when one number is huge and the other tiny")],
    public=["8 12\n", "7 5\n"],
    gen=_gen_gcd,
))


# ---------------------------------------------------------------- lcm-two
def _gen_lcm(rng: random.Random) -> list[str]:
    m = 10**9
    pairs = [(1, 1), (1, m), (m, m), (m, m - 1), (999_999_937, 999_999_929), (6, 4), (7, 7),
             (65536, 65537), (2, 3)]
    pairs += [(rng.randint(1, m), rng.randint(1, m)) for _ in range(3)]
    return [line(a, b) for a, b in pairs]


add(Spec(
    name="lcm-two",
    title="Least Common Multiple",
    legend="You are given two positive integers a and b. Print the smallest positive integer that is "
    "divisible by both a and b.",
    input_spec="A single line with two integers a and b.",
    output_spec="Print one integer: lcm(a, b).",
    constraints=["1 <= a, b <= 10^9", "The answer can be as large as 10^18."],
    cpp=src("""
        #include <iostream>
        #include <numeric>
        int main() {
            long long a, b;
            std::cin >> a >> b;
            std::cout << a / std::gcd(a, b) * b << "\\n";
        }
    """),
    python=src("""
        import math
        a, b = map(int, input().split())
        print(a // math.gcd(a, b) * b)
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        #include <numeric>
        int main() {
            int a, b;
            std::cin >> a >> b;
            std::cout << a / std::gcd(a, b) * b << "\\n";
        }
    """), "32-bit int: the product overflows for large a and b")],
    public=["4 6\n", "5 5\n"],
    gen=_gen_lcm,
))


# ---------------------------------------------------------------- power-of-two
def _gen_pow2(rng: random.Random) -> list[str]:
    xs = [1, 2, 3, 6, 1024, 2**30, 2**31, 2**40, 2**59, 2**59 + 1, 10**18, 2**40 - 1, 2**59 * 3 // 2]
    return [line(x) for x in xs]


add(Spec(
    name="power-of-two",
    title="Power of Two",
    legend="You are given a positive integer n. Decide whether n is a power of two, that is, "
    "n = 2^k for some integer k >= 0 (so 1 = 2^0 counts).",
    input_spec="A single line with one integer n.",
    output_spec="Print YES if n is a power of two, otherwise print NO.",
    constraints=["1 <= n <= 10^18"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            while (n % 2 == 0) n /= 2;
            std::cout << (n == 1 ? "YES" : "NO") << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        while n % 2 == 0:
            n //= 2
        print("YES" if n == 1 else "NO")
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            bool ok = false;
            for (int k = 0; k < 31; k++)
                if ((1 << k) == n) ok = true;
            std::cout << (ok ? "YES" : "NO") << "\\n";
        }
    """), "only tries 2^0..2^30 with int shifts, so 2^31 and larger powers are missed")],
    public=["8\n", "12\n"],
    gen=_gen_pow2,
))


# ---------------------------------------------------------------- leap-year
def _gen_leap(rng: random.Random) -> list[str]:
    xs = [1, 4, 100, 400, 1900, 2000, 2023, 2024, 2100, 999_999_600, 10**9, 999_999_999]
    xs += [rng.randint(1, 10**9) for _ in range(2)]
    return [line(x) for x in xs]


add(Spec(
    name="leap-year",
    title="Leap Year",
    legend="A year is a leap year if it is divisible by 4, except years divisible by 100, which are "
    "leap years only if they are also divisible by 400. So 2024 and 2000 are leap years, but 1900 is "
    "not. Given a year y, decide whether it is a leap year.",
    input_spec="A single line with one integer y.",
    output_spec="Print YES if y is a leap year, otherwise print NO.",
    constraints=["1 <= y <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long y;
            std::cin >> y;
            bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            std::cout << (leap ? "YES" : "NO") << "\\n";
        }
    """),
    python=src("""
        y = int(input())
        print("YES" if (y % 4 == 0 and y % 100 != 0) or y % 400 == 0 else "NO")
    """),
    wrong=[Wrong("python", src("""
        y = int(input())
        print("YES" if y % 4 == 0 and y % 100 != 0 else "NO")
    """), "forgets the divisible-by-400 exception (2000 is a leap year)")],
    public=["1996\n", "1800\n"],
    gen=_gen_leap,
))


# ---------------------------------------------------------------- triangle-check
def _gen_tri(rng: random.Random) -> list[str]:
    m = 10**18
    ts = [(1, 1, 1), (1, 2, 3), (3, 1, 2), (2, 2, 3), (1, 1, 2), (m, m, m), (m, m, 1), (1, m, m),
          (m, 1, 1), (m, 1, m - 1), (5, 12, 13)]
    ts += [tuple(rng.randint(1, m) for _ in range(3)) for _ in range(2)]
    return [line(*t) for t in ts]


add(Spec(
    name="triangle-check",
    title="Can It Be a Triangle?",
    legend="You are given three stick lengths a, b and c. Decide whether they form a triangle with "
    "positive area: each length must be strictly less than the sum of the other two.",
    input_spec="A single line with three integers a, b and c.",
    output_spec="Print YES if the sticks form a triangle with positive area, otherwise print NO.",
    constraints=["1 <= a, b, c <= 10^18"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b, c;
            std::cin >> a >> b >> c;
            bool ok = a + b > c && a + c > b && b + c > a;
            std::cout << (ok ? "YES" : "NO") << "\\n";
        }
    """),
    python=src("""
        a, b, c = map(int, input().split())
        print("YES" if a + b > c and a + c > b and b + c > a else "NO")
    """),
    wrong=[
        Wrong("python", src("""
            a, b, c = map(int, input().split())
            print("YES" if a + b >= c and a + c >= b and b + c >= a else "NO")
        """), "uses >=, accepting flat triangles like 1 2 3"),
        Wrong("cpp", src("""
            #include <iostream>
            int main() {
                int a, b, c;
                std::cin >> a >> b >> c;
                bool ok = a + b > c && a + c > b && b + c > a;
                std::cout << (ok ? "YES" : "NO") << "\\n";
            }
        """), "32-bit int: lengths above 2147483647 do not fit"),
    ],
    public=["3 4 5\n", "1 2 10\n"],
    gen=_gen_tri,
))


# ---------------------------------------------------------------- fizzbuzz-single
def _gen_fizz(rng: random.Random) -> list[str]:
    xs = [1, 3, 5, 15, 30, 45, 9, 10, 7, 10**9, 999_999_990, 999_999_999, 999_999_998]
    return [line(x) for x in xs]


add(Spec(
    name="fizzbuzz-single",
    title="FizzBuzz for One Number",
    legend="You are given a positive integer n. If n is divisible by both 3 and 5, print FizzBuzz. "
    "Otherwise, if n is divisible by 3, print Fizz; if it is divisible by 5, print Buzz. "
    "If none of these apply, print n itself.",
    input_spec="A single line with one integer n.",
    output_spec="Print FizzBuzz, Fizz, Buzz or the number n, exactly as described.",
    constraints=["1 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            if (n % 15 == 0) std::cout << "FizzBuzz\\n";
            else if (n % 3 == 0) std::cout << "Fizz\\n";
            else if (n % 5 == 0) std::cout << "Buzz\\n";
            else std::cout << n << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        if n % 15 == 0:
            print("FizzBuzz")
        elif n % 3 == 0:
            print("Fizz")
        elif n % 5 == 0:
            print("Buzz")
        else:
            print(n)
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        if n % 3 == 0:
            print("Fizz")
        elif n % 5 == 0:
            print("Buzz")
        elif n % 15 == 0:
            print("FizzBuzz")
        else:
            print(n)
    """), "checks divisibility by 3 first, so multiples of 15 print Fizz")],
    public=["6\n", "8\n"],
    gen=_gen_fizz,
))


# ---------------------------------------------------------------- multiplication-table
def _gen_table(rng: random.Random) -> list[str]:
    xs = [1, 2, 9, 10, 214_748_365, 10**9, 999_999_999, 123_456_789, 100, 7]
    xs += [rng.randint(1, 10**9) for _ in range(2)]
    return [line(x) for x in xs]


add(Spec(
    name="multiplication-table",
    title="Multiplication Table",
    legend="You are given a positive integer n. Print its first ten multiples: n * 1, n * 2, ..., n * 10.",
    input_spec="A single line with one integer n.",
    output_spec="Print ten lines; the i-th line contains the integer n * i.",
    constraints=["1 <= n <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            for (int i = 1; i <= 10; i++) std::cout << n * i << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        for i in range(1, 11):
            print(n * i)
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        for i in range(1, 10):
            print(n * i)
    """), "range(1, 10) stops at n * 9")],
    public=["3\n"],
    gen=_gen_table,
))


# ---------------------------------------------------------------- sum-of-squares
def _gen_sumsq(rng: random.Random) -> list[str]:
    xs = [1, 2, 3, 46340, 46341, 50000, 10**6, 999_999, 1000, 123_456]
    xs += [rng.randint(1, 10**6) for _ in range(2)]
    return [line(x) for x in xs]


add(Spec(
    name="sum-of-squares",
    title="Sum of Squares",
    legend="You are given a positive integer n. Print 1*1 + 2*2 + ... + n*n.",
    input_spec="A single line with one integer n.",
    output_spec="Print one integer: the sum of the squares of the integers from 1 to n.",
    constraints=["1 <= n <= 10^6", "The answer can exceed 32-bit integers."],
    cpp=src("""
        #include <iostream>
        int main() {
            long long n;
            std::cin >> n;
            std::cout << n * (n + 1) * (2 * n + 1) / 6 << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(n * (n + 1) * (2 * n + 1) // 6)
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            long long s = 0;
            for (int i = 1; i <= n; i++) s += i * i;
            std::cout << s << "\\n";
        }
    """), "i * i is computed in 32-bit int and overflows for i > 46340")],
    public=["4\n", "5\n"],
    notes=["1 + 4 + 9 + 16 = 30."],
    gen=_gen_sumsq,
))


# ---------------------------------------------------------------- binary-representation
def _gen_bin(rng: random.Random) -> list[str]:
    xs = [0, 1, 2, 3, 8, 255, 256, 2**31, 10**18, 2**59, 2**59 - 1]
    xs += [rng.randint(0, 10**18) for _ in range(2)]
    return [line(x) for x in xs]


add(Spec(
    name="binary-representation",
    title="To Binary",
    legend="You are given a non-negative integer n. Print n in base 2 without leading zeros "
    "(the number 0 is written as 0).",
    input_spec="A single line with one integer n.",
    output_spec="Print the binary representation of n: a string of 0s and 1s.",
    constraints=["0 <= n <= 10^18"],
    cpp=src("""
        #include <algorithm>
        #include <iostream>
        #include <string>
        int main() {
            long long n;
            std::cin >> n;
            std::string s;
            do { s += char('0' + n % 2); n /= 2; } while (n > 0);
            std::reverse(s.begin(), s.end());
            std::cout << s << "\\n";
        }
    """),
    python=src("""
        n = int(input())
        print(bin(n)[2:])
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        s = ""
        while n > 0:
            s = str(n % 2) + s
            n //= 2
        print(s)
    """), "prints an empty line for n = 0")],
    public=["5\n", "16\n"],
    notes=["5 = 4 + 1 = 101 in binary."],
    gen=_gen_bin,
))


# ---------------------------------------------------------------- compare-big-numbers
def _gen_cmpbig(rng: random.Random) -> list[str]:
    def num(k: int) -> str:
        return str(rng.randint(1, 9)) + "".join(str(rng.randint(0, 9)) for _ in range(k - 1))

    big = num(1000)
    big2 = big[:-1] + str((int(big[-1]) + 1) % 10)
    pairs = [("0", "0"), ("0", "1"), ("9", "10"), ("10", "9"), ("100", "99"), ("123", "123"),
             (big, big), (big, big2), (num(1000), num(999)), (num(998), num(1000)),
             ("2", "10"), (num(50), num(50))]
    return [line(a, b) for a, b in pairs]


add(Spec(
    name="compare-big-numbers",
    title="Compare Two Numbers",
    legend="You are given two non-negative integers a and b, which may be very long. Print < if a is "
    "smaller than b, > if a is greater than b, and = if they are equal.",
    input_spec="A single line with two integers a and b, written without leading zeros.",
    output_spec="Print one character: <, > or =.",
    constraints=["Each number has between 1 and 1000 digits."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string a, b;
            std::cin >> a >> b;
            int r;
            if (a.size() != b.size()) r = a.size() < b.size() ? -1 : 1;
            else r = a.compare(b) < 0 ? -1 : (a == b ? 0 : 1);
            std::cout << (r < 0 ? "<" : (r > 0 ? ">" : "=")) << "\\n";
        }
    """),
    python=src("""
        a, b = input().split()
        ka, kb = (len(a), a), (len(b), b)
        print("<" if ka < kb else (">" if ka > kb else "="))
    """),
    wrong=[Wrong("python", src("""
        a, b = input().split()
        print("<" if a < b else (">" if a > b else "="))
    """), "compares the numbers as strings, so 9 > 10")],
    public=["5 3\n", "12 12\n"],
    gen=_gen_cmpbig,
))


# ---------------------------------------------------------------- even-numbers
def _gen_evens(rng: random.Random) -> list[str]:
    xs = [2, 3, 4, 5, 10, 11, 9999, 10000, 1000, 17]
    xs += [rng.randint(2, 10000) for _ in range(2)]
    return [line(x) for x in xs]


add(Spec(
    name="even-numbers",
    title="Even Numbers up to n",
    legend="You are given an integer n. Print all even numbers from 2 to n inclusive, in increasing order.",
    input_spec="A single line with one integer n.",
    output_spec="Print the even numbers 2, 4, ... that do not exceed n, on one line separated by spaces.",
    constraints=["2 <= n <= 10^4"],
    cpp=src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            for (int i = 2; i <= n; i += 2) std::cout << i << (i + 2 <= n ? ' ' : '\\n');
        }
    """),
    python=src("""
        n = int(input())
        print(*range(2, n + 1, 2))
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        print(*range(2, n, 2))
    """), "range end is exclusive, so n itself is missed when n is even")],
    public=["7\n", "8\n"],
    gen=_gen_evens,
))


# ---------------------------------------------------------------- count-multiples
def _gen_mult(rng: random.Random) -> list[str]:
    m = 10**18
    ts = [(1, 1, 1), (1, 1, 2), (5, 5, 5), (5, 9, 5), (6, 9, 5), (1, m, 1), (1, m, m), (m, m, 7),
          (10, 20, 10), (7, 13, 7), (2, m, 10**9)]
    for _ in range(2):
        a = rng.randint(1, m)
        ts.append((a, rng.randint(a, m), rng.randint(1, 10**6)))
    return [line(*t) for t in ts]


add(Spec(
    name="count-multiples",
    title="Count the Multiples",
    legend="You are given three positive integers a, b and k. Count the integers x with a <= x <= b "
    "that are divisible by k.",
    input_spec="A single line with three integers a, b and k.",
    output_spec="Print one integer: how many multiples of k lie between a and b inclusive.",
    constraints=["1 <= a <= b <= 10^18", "1 <= k <= 10^18"],
    cpp=src("""
        #include <iostream>
        int main() {
            long long a, b, k;
            std::cin >> a >> b >> k;
            std::cout << b / k - (a - 1) / k << "\\n";
        }
    """),
    python=src("""
        a, b, k = map(int, input().split())
        print(b // k - (a - 1) // k)
    """),
    wrong=[Wrong("python", src("""
        a, b, k = map(int, input().split())
        print(b // k - a // k)
    """), "off by one: misses a itself when a is a multiple of k")],
    public=["1 10 3\n", "11 14 5\n"],
    notes=["The multiples of 3 between 1 and 10 are 3, 6 and 9."],
    gen=_gen_mult,
))
