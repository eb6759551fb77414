"""Starter problems about a list of integers: the first line holds n, the second the n numbers."""

from __future__ import annotations

import random

from common import Spec, Wrong, array_input, rand_ints, src

SPECS: list[Spec] = []
add = SPECS.append

M = 10**9
N_MAX = 5000
LIST_INPUT = "The first line contains an integer n. The second line contains n integers a_1, ..., a_n."


def _common_lists(rng: random.Random) -> list[list[int]]:
    """Edge cases shared by the list problems: one element, all equal, all negative, extremes, big."""
    return [
        [0],
        [-5],
        [7, 7, 7],
        [-3, -1, -2],
        [-M, -M + 1, -M],
        [M, -M],
        [1, 0, -1, 0],
        rand_ints(rng, 10, -20, 20),
        rand_ints(rng, 100, -M, M),
        rand_ints(rng, N_MAX, -M, M),
        rand_ints(rng, N_MAX, -M, -1),
    ]


# ---------------------------------------------------------------- max-of-list
def _gen_max(rng: random.Random) -> list[str]:
    ls = _common_lists(rng) + [[M] * 3 + [-M], rand_ints(rng, N_MAX, M - 100, M)]
    return [array_input(x) for x in ls]


add(Spec(
    name="max-of-list",
    title="Largest Number",
    legend="You are given n integers. Print the largest of them.",
    input_spec=LIST_INPUT,
    output_spec="Print one integer: the maximum of a_1, ..., a_n.",
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
                if (i == 0 || x > best) best = x;
            }
            std::cout << best << "\\n";
        }
    """),
    python=src("""
        import sys
        data = sys.stdin.read().split()
        n = int(data[0])
        print(max(int(x) for x in data[1 : n + 1]))
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        a = list(map(int, input().split()))
        best = 0
        for x in a:
            if x > best:
                best = x
        print(best)
    """), "starts the maximum at 0, wrong when every number is negative")],
    public=["5\n3 9 2 9 4\n", "1\n42\n"],
    gen=_gen_max,
))


# ---------------------------------------------------------------- sum-of-list
def _gen_sum(rng: random.Random) -> list[str]:
    ls = _common_lists(rng) + [[M] * N_MAX, [M, M, M]]
    return [array_input(x) for x in ls]


add(Spec(
    name="sum-of-list",
    title="Sum of a List",
    legend="You are given n integers. Print their sum.",
    input_spec=LIST_INPUT,
    output_spec="Print one integer: a_1 + a_2 + ... + a_n.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9", "The sum can exceed 32-bit integers."],
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
        import sys
        data = sys.stdin.read().split()
        n = int(data[0])
        print(sum(int(x) for x in data[1 : n + 1]))
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            int s = 0;
            for (int i = 0; i < n; i++) { int x; std::cin >> x; s += x; }
            std::cout << s << "\\n";
        }
    """), "32-bit int accumulator overflows")],
    public=["3\n1 2 3\n", "2\n-5 5\n"],
    gen=_gen_sum,
))


# ---------------------------------------------------------------- count-positive
def _gen_pos(rng: random.Random) -> list[str]:
    ls = _common_lists(rng) + [[0] * 10, rand_ints(rng, N_MAX, -2, 2)]
    return [array_input(x) for x in ls]


add(Spec(
    name="count-positive",
    title="Count the Positives",
    legend="You are given n integers. Count how many of them are strictly greater than zero.",
    input_spec=LIST_INPUT,
    output_spec="Print one integer: the number of positive a_i.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            int n, c = 0;
            std::cin >> n;
            for (int i = 0; i < n; i++) { long long x; std::cin >> x; if (x > 0) c++; }
            std::cout << c << "\\n";
        }
    """),
    python=src("""
        import sys
        data = sys.stdin.read().split()
        n = int(data[0])
        print(sum(1 for x in data[1 : n + 1] if int(x) > 0))
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        a = list(map(int, input().split()))
        print(sum(1 for x in a if x >= 0))
    """), "counts zeros as positive")],
    public=["5\n3 -1 4 -1 5\n", "3\n-7 -8 -9\n"],
    gen=_gen_pos,
))


# ---------------------------------------------------------------- sort-numbers
def _gen_sort(rng: random.Random) -> list[str]:
    ls = _common_lists(rng) + [[10, 9, 100, 2], [-10, -9, -100], list(range(20, 0, -1))]
    return [array_input(x) for x in ls]


add(Spec(
    name="sort-numbers",
    title="Sort the Numbers",
    legend="You are given n integers. Print them in non-decreasing order.",
    input_spec=LIST_INPUT,
    output_spec="Print the n numbers sorted from smallest to largest, on one line separated by spaces.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <algorithm>
        #include <iostream>
        #include <vector>
        int main() {
            int n;
            std::cin >> n;
            std::vector<long long> a(n);
            for (auto &x : a) std::cin >> x;
            std::sort(a.begin(), a.end());
            for (int i = 0; i < n; i++) std::cout << a[i] << (i + 1 < n ? ' ' : '\\n');
        }
    """),
    python=src("""
        import sys
        data = sys.stdin.read().split()
        n = int(data[0])
        print(*sorted(int(x) for x in data[1 : n + 1]))
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        a = input().split()
        print(*sorted(a))
    """), "sorts the numbers as strings, so 10 comes before 9")],
    public=["4\n3 1 4 2\n", "3\n5 5 1\n"],
    gen=_gen_sort,
))


# ---------------------------------------------------------------- distinct-count
def _gen_distinct(rng: random.Random) -> list[str]:
    ls = _common_lists(rng) + [[1, 2, 1], [3, 3, 1, 1, 3], rand_ints(rng, N_MAX, 1, 1000)]
    return [array_input(x) for x in ls]


add(Spec(
    name="distinct-count",
    title="Different Values",
    legend="You are given n integers. Print how many different values appear among them.",
    input_spec=LIST_INPUT,
    output_spec="Print one integer: the number of distinct values.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <iostream>
        #include <set>
        int main() {
            int n;
            std::cin >> n;
            std::set<long long> s;
            for (int i = 0; i < n; i++) { long long x; std::cin >> x; s.insert(x); }
            std::cout << s.size() << "\\n";
        }
    """),
    python=src("""
        import sys
        data = sys.stdin.read().split()
        n = int(data[0])
        print(len(set(data[1 : n + 1])))
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        a = list(map(int, input().split()))
        c = 1
        for i in range(1, n):
            if a[i] != a[i - 1]:
                c += 1
        print(c)
    """), "counts changes between neighbours, which only works if the list is sorted")],
    public=["5\n1 1 2 2 3\n", "3\n4 4 4\n"],
    gen=_gen_distinct,
))


# ---------------------------------------------------------------- range-of-list
def _gen_range(rng: random.Random) -> list[str]:
    ls = _common_lists(rng) + [[-M] + rand_ints(rng, N_MAX - 2, -M, M) + [M]]
    return [array_input(x) for x in ls]


add(Spec(
    name="range-of-list",
    title="Spread of the Numbers",
    legend="You are given n integers. Print the difference between the largest and the smallest of them.",
    input_spec=LIST_INPUT,
    output_spec="Print one integer: max(a) - min(a).",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <algorithm>
        #include <iostream>
        #include <vector>
        int main() {
            int n;
            std::cin >> n;
            std::vector<long long> a(n);
            for (auto &x : a) std::cin >> x;
            std::cout << *std::max_element(a.begin(), a.end()) - *std::min_element(a.begin(), a.end())
                      << "\\n";
        }
    """),
    python=src("""
        import sys
        data = sys.stdin.read().split()
        n = int(data[0])
        a = [int(x) for x in data[1 : n + 1]]
        print(max(a) - min(a))
    """),
    wrong=[Wrong("cpp", src("""
        #include <algorithm>
        #include <iostream>
        int main() {
            int n;
            std::cin >> n;
            long long mx = 0, mn = 0;
            for (int i = 0; i < n; i++) {
                long long x;
                std::cin >> x;
                mx = std::max(mx, x);
                mn = std::min(mn, x);
            }
            std::cout << mx - mn << "\\n";
        }
    """), "starts max and min at 0, wrong when all numbers have the same sign")],
    public=["5\n3 8 -1 5 0\n", "2\n-4 6\n"],
    gen=_gen_range,
))


# ---------------------------------------------------------------- index-of-max
def _gen_argmax(rng: random.Random) -> list[str]:
    ls = _common_lists(rng) + [[5, 1, 5], [2, 2], rand_ints(rng, N_MAX, 1, 3)]
    return [array_input(x) for x in ls]


add(Spec(
    name="index-of-max",
    title="Where Is the Maximum?",
    legend="You are given n integers a_1, ..., a_n. Print the position of the largest number. "
    "If the largest value occurs several times, print the smallest such position. "
    "Positions are numbered from 1.",
    input_spec=LIST_INPUT,
    output_spec="Print one integer i (1 <= i <= n): the first position holding the maximum.",
    constraints=[f"1 <= n <= {N_MAX}", "-10^9 <= a_i <= 10^9"],
    cpp=src("""
        #include <iostream>
        int main() {
            int n, best = 1;
            std::cin >> n;
            long long mx = 0;
            for (int i = 1; i <= n; i++) {
                long long x;
                std::cin >> x;
                if (i == 1 || x > mx) { mx = x; best = i; }
            }
            std::cout << best << "\\n";
        }
    """),
    python=src("""
        import sys
        data = sys.stdin.read().split()
        n = int(data[0])
        a = [int(x) for x in data[1 : n + 1]]
        print(a.index(max(a)) + 1)
    """),
    wrong=[Wrong("python", src("""
        n = int(input())
        a = list(map(int, input().split()))
        best = 0
        for i in range(n):
            if a[i] >= a[best]:
                best = i
        print(best + 1)
    """), "uses >=, so it returns the last position of the maximum, not the first")],
    public=["4\n1 5 2 3\n", "1\n-8\n"],
    gen=_gen_argmax,
))
