from klineage.sass import sass_counts, tool

LISTING = """
        /*0140*/              @!P0 LDG.E.128 R8, desc[UR4][R6.64] ;
        /*0150*/              @!P0 LDG.E R0, desc[UR4][R4.64] ;
        /*0160*/                   LDG.E.U16 R3, desc[UR4][R4.64] ;
        /*0170*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;
        /*0180*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;
        /*0190*/                   UTMALDG.2D [UR8], [UR4] ;
        /*01a0*/              @!P0 STG.E.64 desc[UR4][R2.64], R10 ;
        /*01b0*/                   LDGSTS.E.BYPASS.LTC128B.128 [R3], desc[UR4][R4.64] ;
"""


def test_sass_counts():
    counts = sass_counts(LISTING)
    assert counts["global_load_widths"] == {"16": 1, "32": 1, "128": 2}
    assert counts["cp_async"] == 1
    assert counts["max_load_bits"] == 128 and counts["max_store_bits"] == 64
    assert counts["tensor_core_instructions"] == 2
    assert counts["tma_instructions"] == 1


def test_triton_ships_the_tools():
    assert tool("ptxas") and tool("nvdisasm")


def test_pipelined_loads_count_what_the_pipeliner_made_asynchronous():
    """A tl.dot loop's loads become asynchronous copies from 2 stages on; a loop of plain loads compiles to the same
    cubin at 1 and 3 stages, none pipelined (benchmarks/stages_cubin.py)."""
    from benchmarks.stages_cubin import compiled
    from klineage.sass import kernel_metrics

    assert kernel_metrics(compiled("dot_loop", 1), "sm_90")["pipelined_loads"] == 0
    assert kernel_metrics(compiled("dot_loop", 3), "sm_90")["pipelined_loads"] > 0
    one, three = compiled("plain_loop", 1), compiled("plain_loop", 3)
    assert kernel_metrics(three, "sm_90")["pipelined_loads"] == 0 and one.asm["cubin"] == three.asm["cubin"]
