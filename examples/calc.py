def add(a: int, b: int) -> int:
    """Sum of a and b."""
    return


def area(width: float, height: float) -> float:
    """Area of a width x height rectangle."""
    return 


if __name__ == "__main__":
    print(add(2, 3), area(2.0, 3.0))
