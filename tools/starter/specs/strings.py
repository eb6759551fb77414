"""Starter problems about one word or one line of text."""

from __future__ import annotations

import random

from common import Spec, Wrong, src, word

SPECS: list[Spec] = []
add = SPECS.append

LOWER = "abcdefghijklmnopqrstuvwxyz"


def _words_line(rng: random.Random, n_words: int, max_gap: int = 1, max_len: int = 8) -> str:
    out = []
    for i in range(n_words):
        if i:
            out.append(" " * rng.randint(1, max_gap))
        out.append(word(rng, rng.randint(1, max_len)))
    return "".join(out)


# ---------------------------------------------------------------- reverse-string
def _gen_reverse(rng: random.Random) -> list[str]:
    ws = ["a", "ab", "aa", "racecar", "zyx", "abcdefghijklmnopqrstuvwxyz", word(rng, 30000)]
    ws += [word(rng, rng.randint(2, 50)) for _ in range(4)]
    ws.append(word(rng, 1000, "ab"))
    return [w + "\n" for w in ws]


add(Spec(
    name="reverse-string",
    title="Reverse a Word",
    legend="You are given a word s. Print it backwards.",
    input_spec="A single line with the word s, made of lowercase English letters.",
    output_spec="Print s reversed.",
    constraints=["1 <= |s| <= 3 * 10^4"],
    cpp=src("""
        #include <algorithm>
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            std::reverse(s.begin(), s.end());
            std::cout << s << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        print(s[::-1])
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            for (int i = (int)s.size() - 1; i > 0; i--) std::cout << s[i];
            std::cout << "\\n";
        }
    """), "loop stops at i > 0, dropping the first letter")],
    public=["hello\n", "abc\n"],
    gen=_gen_reverse,
))


# ---------------------------------------------------------------- count-vowels
def _gen_vowels(rng: random.Random) -> list[str]:
    ws = ["a", "b", "y", "aeiou", "bcdfg", "yyy", "sky", "rhythm", word(rng, 50000),
          word(rng, 50000, "aeiouy")]
    ws += [word(rng, rng.randint(1, 40)) for _ in range(3)]
    return [w + "\n" for w in ws]


add(Spec(
    name="count-vowels",
    title="Count the Vowels",
    legend="You are given a word s. Count how many of its letters are vowels. The vowels are "
    "a, e, i, o and u (the letter y is not a vowel here).",
    input_spec="A single line with the word s, made of lowercase English letters.",
    output_spec="Print one integer: the number of vowels in s.",
    constraints=["1 <= |s| <= 5 * 10^4"],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            int c = 0;
            for (char ch : s)
                if (std::string("aeiou").find(ch) != std::string::npos) c++;
            std::cout << c << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        print(sum(1 for c in s if c in "aeiou"))
    """),
    wrong=[Wrong("python", src("""
        s = input().strip()
        print(sum(1 for c in s if c in "aeiouy"))
    """), "counts y as a vowel")],
    public=["programming\n", "queue\n"],
    notes=["The vowels are o, a and i."],
    gen=_gen_vowels,
))


# ---------------------------------------------------------------- line-length
def _gen_linelen(rng: random.Random) -> list[str]:
    ls = ["a", "a b", "hello world", "x y z", "abc", _words_line(rng, 12000), word(rng, 100)]
    ls += [_words_line(rng, rng.randint(1, 10)) for _ in range(5)]
    return [s + "\n" for s in ls]


add(Spec(
    name="line-length",
    title="Length of a Line",
    legend="You are given one line of text made of lowercase English letters and spaces. "
    "Print how many characters it has, counting the spaces.",
    input_spec="A single line of text. It does not start or end with a space.",
    output_spec="Print one integer: the number of characters in the line, spaces included.",
    constraints=["The line has between 1 and 7 * 10^4 characters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::getline(std::cin, s);
            while (!s.empty() && (s.back() == '\\r' || s.back() == '\\n')) s.pop_back();
            std::cout << s.size() << "\\n";
        }
    """),
    python=src("""
        import sys
        s = sys.stdin.readline().rstrip("\\r\\n")
        print(len(s))
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            std::cout << s.size() << "\\n";
        }
    """), "cin >> s reads only the first word")],
    public=["good morning\n", "xyz\n"],
    notes=["Four letters, one space and seven more letters."],
    gen=_gen_linelen,
))


# ---------------------------------------------------------------- uppercase-word
def _gen_upper(rng: random.Random) -> list[str]:
    an = LOWER + "0123456789"
    ws = ["a", "z", "abc123", "0", "2024", "a1b2c3", word(rng, 50000, an), word(rng, 20)]
    ws += [word(rng, rng.randint(1, 30), an) for _ in range(4)]
    return [w + "\n" for w in ws]


add(Spec(
    name="uppercase-word",
    title="Shout It",
    legend="You are given a word s made of lowercase English letters and digits. Print it with every "
    "letter changed to uppercase; digits stay as they are.",
    input_spec="A single line with the word s.",
    output_spec="Print s in uppercase.",
    constraints=["1 <= |s| <= 5 * 10^4", "s contains only the characters a-z and 0-9."],
    cpp=src("""
        #include <cctype>
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            for (char &c : s) c = (char)std::toupper((unsigned char)c);
            std::cout << s << "\\n";
        }
    """),
    python=src("""
        print(input().strip().upper())
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            for (char &c : s) c = c - 'a' + 'A';
            std::cout << s << "\\n";
        }
    """), "shifts every character, so digits turn into other symbols")],
    public=["hello\n", "world\n"],
    gen=_gen_upper,
))


# ---------------------------------------------------------------- repeat-word
def _gen_repeat(rng: random.Random) -> list[str]:
    ts = [("a", 1), ("ab", 1), ("z", 2), ("abcdefghij", 1000), ("x", 1000), ("hi", 3), ("aa", 2)]
    ts += [(word(rng, rng.randint(1, 10)), rng.randint(1, 1000)) for _ in range(5)]
    return [f"{w} {k}\n" for w, k in ts]


add(Spec(
    name="repeat-word",
    title="Repeat the Word",
    legend="You are given a word s and a positive integer k. Print s written k times in a row, "
    "with no spaces between the copies.",
    input_spec="A single line with the word s (lowercase English letters) and the integer k, "
    "separated by a space.",
    output_spec="Print one line: s repeated k times.",
    constraints=["1 <= |s| <= 10", "1 <= k <= 1000"],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            int k;
            std::cin >> s >> k;
            std::string r;
            for (int i = 0; i < k; i++) r += s;
            std::cout << r << "\\n";
        }
    """),
    python=src("""
        s, k = input().split()
        print(s * int(k))
    """),
    wrong=[Wrong("cpp", src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            int k;
            std::cin >> s >> k;
            for (int i = 1; i < k; i++) std::cout << s;
            std::cout << "\\n";
        }
    """), "loop from 1 to k - 1 prints one copy too few")],
    public=["ab 3\n", "hello 1\n"],
    gen=_gen_repeat,
))


# ---------------------------------------------------------------- count-char
def _gen_countchar(rng: random.Random) -> list[str]:
    ts = [("a", "a"), ("a", "b"), ("aaa", "a"), ("abc", "a"), ("bca", "a"), ("zzzz", "y"),
          (word(rng, 50000, "ab"), "a"), (word(rng, 50000), "e")]
    for _ in range(4):
        w = word(rng, rng.randint(1, 30))
        ts.append((w, w[0] if rng.random() < 0.5 else rng.choice(LOWER)))
    return [f"{w}\n{c}\n" for w, c in ts]


add(Spec(
    name="count-char",
    title="Count a Letter",
    legend="You are given a word s and a letter c. Count how many times c occurs in s.",
    input_spec="The first line contains the word s. The second line contains the single letter c. "
    "Both use lowercase English letters only.",
    output_spec="Print one integer: the number of positions of s that hold the letter c.",
    constraints=["1 <= |s| <= 5 * 10^4"],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            char c;
            std::cin >> s >> c;
            int n = 0;
            for (char ch : s) if (ch == c) n++;
            std::cout << n << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        c = input().strip()
        print(s.count(c))
    """),
    wrong=[Wrong("python", src("""
        s = input().strip()
        c = input().strip()
        n = 0
        for i in range(1, len(s)):
            if s[i] == c:
                n += 1
        print(n)
    """), "loop starts at index 1 and skips the first letter")],
    public=["banana\na\n", "hello\nz\n"],
    notes=["The letter a appears three times in banana."],
    gen=_gen_countchar,
))


# ---------------------------------------------------------------- palindrome-check
def _gen_pal(rng: random.Random) -> list[str]:
    half = word(rng, 25000)
    ws = ["a", "aa", "ab", "aba", "abca", "abcba", "abccba", "abcdba", half + half[::-1],
          half[1:] + "x" + half[1:][::-1], "a" + word(rng, 20) + "a"]
    bad = list(half + half[::-1])
    bad[len(bad) // 2 - 1] = "a" if bad[len(bad) // 2 - 1] != "a" else "b"
    ws.append("".join(bad))
    return [w + "\n" for w in ws]


add(Spec(
    name="palindrome-check",
    title="Palindrome",
    legend="A palindrome is a word that reads the same from left to right and from right to left, "
    "like level. You are given a word s; decide whether it is a palindrome.",
    input_spec="A single line with the word s, made of lowercase English letters.",
    output_spec="Print YES if s is a palindrome, otherwise print NO.",
    constraints=["1 <= |s| <= 5 * 10^4"],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            std::string r(s.rbegin(), s.rend());
            std::cout << (s == r ? "YES" : "NO") << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        print("YES" if s == s[::-1] else "NO")
    """),
    wrong=[Wrong("python", src("""
        s = input().strip()
        print("YES" if s[0] == s[-1] else "NO")
    """), "only compares the first and last letters")],
    public=["level\n", "abc\n"],
    gen=_gen_pal,
))


# ---------------------------------------------------------------- count-words
def _gen_words(rng: random.Random) -> list[str]:
    ls = ["a", "a b", "a  b", "abc", "x   y    z", "hello world", _words_line(rng, 10000, 3, 6),
          _words_line(rng, 5, 1)]
    ls += [_words_line(rng, rng.randint(1, 20), 4) for _ in range(4)]
    return [s + "\n" for s in ls]


add(Spec(
    name="count-words",
    title="Count the Words",
    legend="You are given one line of text. It consists of words made of lowercase English letters, "
    "separated by one or more spaces. Count the words.",
    input_spec="A single line of text. It does not start or end with a space and contains at least one word.",
    output_spec="Print one integer: the number of words.",
    constraints=["The line has between 1 and 6 * 10^4 characters."],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string w;
            int n = 0;
            while (std::cin >> w) n++;
            std::cout << n << "\\n";
        }
    """),
    python=src("""
        print(len(input().split()))
    """),
    wrong=[Wrong("python", src("""
        s = input()
        print(s.count(" ") + 1)
    """), "counts spaces + 1, wrong when words are separated by several spaces")],
    public=["hello big world\n", "code\n"],
    gen=_gen_words,
))


# ---------------------------------------------------------------- caesar-shift
def _gen_caesar(rng: random.Random) -> list[str]:
    ws = ["a", "z", "zz", "az", "xyz", "abcdefghijklmnopqrstuvwxyz", word(rng, 40000), word(rng, 50, "xyz")]
    ws += [word(rng, rng.randint(1, 30)) for _ in range(4)]
    return [w + "\n" for w in ws]


add(Spec(
    name="caesar-shift",
    title="Next Letter",
    legend="You are given a word s. Replace every letter with the next letter of the alphabet: a becomes "
    "b, b becomes c, and so on, and z wraps around to a. Print the new word.",
    input_spec="A single line with the word s, made of lowercase English letters.",
    output_spec="Print the shifted word.",
    constraints=["1 <= |s| <= 4 * 10^4"],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s;
            std::cin >> s;
            for (char &c : s) c = (char)('a' + (c - 'a' + 1) % 26);
            std::cout << s << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        print("".join(chr((ord(c) - 97 + 1) % 26 + 97) for c in s))
    """),
    wrong=[Wrong("python", src("""
        s = input().strip()
        print("".join(chr(ord(c) + 1) for c in s))
    """), "no wrap-around: z becomes { instead of a")],
    public=["abc\n", "hello\n"],
    gen=_gen_caesar,
))


# ---------------------------------------------------------------- double-each-char
def _gen_double(rng: random.Random) -> list[str]:
    ws = ["a", "z", "ab", "aa", "abc", word(rng, 30000), word(rng, 100, "ab")]
    ws += [word(rng, rng.randint(1, 30)) for _ in range(5)]
    return [w + "\n" for w in ws]


add(Spec(
    name="double-each-char",
    title="Double Every Letter",
    legend="You are given a word s. Print a new word in which every letter of s is written twice in a "
    "row, keeping the order. For example, cat becomes ccaatt.",
    input_spec="A single line with the word s, made of lowercase English letters.",
    output_spec="Print the new word, whose length is twice the length of s.",
    constraints=["1 <= |s| <= 3 * 10^4"],
    cpp=src("""
        #include <iostream>
        #include <string>
        int main() {
            std::string s, r;
            std::cin >> s;
            for (char c : s) { r += c; r += c; }
            std::cout << r << "\\n";
        }
    """),
    python=src("""
        s = input().strip()
        print("".join(c * 2 for c in s))
    """),
    wrong=[Wrong("python", src("""
        s = input().strip()
        print(s * 2)
    """), "repeats the whole word instead of each letter (only right for one-letter words)")],
    public=["cat\n", "go\n"],
    gen=_gen_double,
))
