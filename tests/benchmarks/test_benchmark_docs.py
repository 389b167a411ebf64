from benchmarks.docs_section import write_section


def test_it_replaces_its_own_section_and_leaves_the_others(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n## A\nold a\n\n## B\nkeep b\n")
    write_section("## A", "## A\nnew a\n\n", doc)
    write_section("## C", "## C\nnew c\n", doc)
    assert doc.read_text() == "# Benchmarks\n\n## A\nnew a\n\n## B\nkeep b\n\n## C\nnew c\n"
