// Prints the test table of index/bm25's TestTiesLikeAnserini: constructed near-ties (4-decimal
// roundings 1e-4 apart, ties in a row, rounding halves) through the real
// ScoreTiesAdjusterReranker of pyserini 0.22.1's Anserini jar. Run by hand:
//   JAR=~/.cache/needle/venv-pyserini/lib/python3.11/site-packages/pyserini/resources/jars/anserini-0.22.1-fatjar.jar
//   J=/usr/lib/jvm/java-17-openjdk-amd64/bin
//   $J/javac -d /tmp/ties -cp $JAR bench/anserini_ties/Ties.java && $J/java -cp $JAR:/tmp/ties Ties
import io.anserini.rerank.ScoredDocuments;
import io.anserini.rerank.lib.ScoreTiesAdjusterReranker;
import org.apache.lucene.document.Document;
public class Ties {
  public static void main(String[] a) {
    float[][] cases = {{0.3001f,0.3000f,0.2999f,0.2998f,0.2990f},{1.2346f,1.2345f,1.2345f,1.2344f},{6.97165f,6.97155f,6.9715f},
      {2.50005f,2.50004999f,2.5000f,2.4999f,2.4999f},{10.00005f,10.0f,9.9999f,9.9998f},{0.00005f,0.00004f,0.0f},{7.30015f,7.3001f,7.30005f,7.3f}};
    for (float[] c : cases) {
      ScoredDocuments d = new ScoredDocuments();
      d.documents = new Document[c.length]; d.scores = c.clone();
      for (int i = 0; i < c.length; i++) d.documents[i] = new Document();
      new ScoreTiesAdjusterReranker().rerank(d, null);
      StringBuilder sb = new StringBuilder("{[]float32{");
      for (float x : c) sb.append(x).append(", ");
      sb.append("}, []float32{");
      for (float x : d.scores) sb.append(x).append(", ");
      System.out.println(sb.append("}},"));
    }
  }
}
