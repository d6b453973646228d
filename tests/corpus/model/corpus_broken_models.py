def convnet(:
    pass
