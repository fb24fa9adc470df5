"""The oracle of test_cap_langdetect: Debian's python3-langdetect with
DetectorFactory.seed = 0.

    langdetect_seed0.py TEXTS.jsonl   per {"text": ...} line, a JSON list:
                                      detect()'s answer ("" where it raises),
                                      the number of n-gram features and
                                      get_probabilities() as [lang, prob]
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
    from langdetect import DetectorFactory, LangDetectException
    from langdetect import detector_factory
    DetectorFactory.seed = 0
    detector_factory.init_factory()
    factory = detector_factory._factory
    with open(sys.argv[1], encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            features = factory.create()
            features.append(text)
            features.cleaning_text()
            n_features = len(features._extract_ngrams())
            detector = factory.create()
            detector.append(text)
            try:
                probabilities = detector.get_probabilities()
                # what detect() returns
                answer = probabilities[0].lang if probabilities else "unknown"
            except LangDetectException:
                answer, probabilities = "", []
            print(json.dumps([answer, n_features, [[p.lang, p.prob] for p in probabilities]]))

main()
