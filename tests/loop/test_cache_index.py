"""The semantic cache's vector index, on its own."""

from __future__ import annotations

from services.orchestrator.cache import CacheEntry, VectorIndex, is_fresh


def entry(text: str, vector: list[float]) -> CacheEntry:
    return CacheEntry(
        text=text, embedding=vector, output=f"answer to {text}", worker_type="GENERAL"
    )


def test_the_closest_answer_wins_by_cosine_similarity() -> None:
    index = VectorIndex()
    index.put("a", entry("a", [1.0, 0.0, 0.0]))
    index.put("b", entry("b", [0.0, 1.0, 0.0]))
    score, found = index.best([0.1, 2.0, 0.0]) or (0.0, None)
    assert found is not None and found.text == "b"
    assert 0.99 < score <= 1.0


def one_hot(i: int, n: int = 200) -> list[float]:
    return [float(i == j) for j in range(n)]


def test_the_index_grows_replaces_and_forgets() -> None:
    index = VectorIndex()
    for i in range(200):  # past the first capacity
        index.put(f"k{i}", entry(f"t{i}", one_hot(i)))
    assert len(index) == 200
    found = index.best(one_hot(150))
    assert found is not None and found[1].text == "t150"
    index.put("k150", entry("new", one_hot(150)))
    found = index.best(one_hot(150))
    assert found is not None and found[1].text == "new" and len(index) == 200
    index.remove("k150")
    found = index.best(one_hot(150))
    assert found is not None and found[0] < 0.5, "nothing left close to it"


def test_vectors_of_another_dimension_are_not_compared() -> None:
    index = VectorIndex()
    index.put("a", entry("a", [1.0, 0.0]))
    index.put("b", entry("b", [1.0, 0.0, 0.0]))
    assert len(index) == 1
    assert index.best([1.0, 0.0, 0.0]) is None


def test_news_prices_and_current_data_are_fresh() -> None:
    assert (
        is_fresh("latest news on chips") and is_fresh("bitcoin price") and is_fresh("weather today")
    )
    assert not is_fresh("explain photosynthesis")
