"""The oracle of test_cap_langdetect: Debian's python3-langdetect with
DetectorFactory.seed = 0.

    langdetect_seed0.py TEXTS.jsonl   one answer per {"text": ...} line, as a
                                      JSON string ("" where langdetect raises)
    langdetect_seed0.py --random      what random.Random(0) draws, one JSON
                                      list per method
"""
import json
import random
import sys


def main():
    if sys.argv[1:] == ["--random"]:
        r = random.Random(0)
        print(json.dumps([r.getrandbits(32) for _ in range(700)]))
        r.seed(0)
        print(json.dumps([r.random() for _ in range(5)]))
        r.seed(0)
        print(json.dumps([r.gauss(0.0, 1.0) for _ in range(5)]))
        r.seed(0)
        print(json.dumps([r._randbelow(n) for n in (1, 2, 3, 7, 100, 1000, 65537, 30000) * 4]))
        return
    from langdetect import DetectorFactory, LangDetectException, detect
    DetectorFactory.seed = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        for line in f:
            try:
                answer = detect(json.loads(line)["text"])
            except LangDetectException:
                answer = ""
            print(json.dumps(answer))


main()
